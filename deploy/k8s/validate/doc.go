// Package validate checks scrubd's Kubernetes manifests offline: each
// document is decoded strictly (unknown fields are errors) into the real
// k8s.io/api type of its kind, then checked for what the agent needs. It is
// its own module so that the Kubernetes API modules never reach the agent's
// go.mod or binary.
package validate
