// Package deploy holds no agent code. It is the home of scrubd's deployment
// files (build script, systemd unit, container and Kubernetes manifests,
// example configs, Grafana dashboard, Prometheus rules), and its tests check
// those files against the agent itself: every example config passes
// agent/config's validator, the systemd unit passes `systemd-analyze
// verify`, every metric the dashboard and the Prometheus rules query is one
// agent/metrics exports, and every alert passes its `promtool test rules`
// cases.
package deploy
