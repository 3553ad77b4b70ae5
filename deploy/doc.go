// Package deploy holds no agent code. It is the home of scrubd's deployment
// files (build script, systemd unit, container and Kubernetes manifests,
// example configs, Grafana dashboard), and its tests check those files
// against the agent itself: every example config passes agent/config's
// validator, the systemd unit passes `systemd-analyze verify`, and every
// metric the dashboard queries is one agent/metrics exports.
package deploy
