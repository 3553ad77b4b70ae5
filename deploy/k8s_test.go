package deploy_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/metrics"
)

// The Kubernetes manifests are checked against the API types by the
// separate module in k8s/validate (cd deploy/k8s/validate && go test ./...).
// These tests check them against the agent: the ConfigMap's config passes
// agent/config, the probes hit paths the agent serves, on the port the
// config listens on, and the capability set is the systemd unit's.

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// dig walks maps and list indexes ("0") of decoded YAML.
func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for i, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(x) {
				t.Fatalf("%s: no index %s", strings.Join(path[:i+1], "."), p)
			}
			v = x[n]
		default:
			t.Fatalf("%s: not a map or list", strings.Join(path[:i+1], "."))
		}
		if v == nil {
			t.Fatalf("%s: missing", strings.Join(path[:i+1], "."))
		}
	}
	return v
}

// k8sConfig writes the ConfigMap's files into a directory standing in for
// /etc/scrubd and validates the config as `scrubd config check` would.
func k8sConfig(t *testing.T) *config.Config {
	t.Helper()
	cm := readYAML(t, "k8s/configmap.yaml")
	dir := t.TempDir()
	data := dig(t, cm, "data").(map[string]any)
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v.(string)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(filepath.Join(dir, "scrubd.yaml"))
	if err != nil {
		t.Fatal("ConfigMap has no scrubd.yaml")
	}
	c, err := checkConfig(t, "configmap:scrubd.yaml", text, dir)
	if err != nil {
		t.Fatalf("ConfigMap config refused:\n%v", err)
	}
	return c
}

func agentContainer(t *testing.T) map[string]any {
	t.Helper()
	ds := readYAML(t, "k8s/daemonset.yaml")
	return dig(t, ds, "spec", "template", "spec", "containers", "0").(map[string]any)
}

func TestK8sConfigMapConfigValidates(t *testing.T) {
	c := k8sConfig(t)
	if c.Offload.Backend != "tcflower" || c.Software.Engine != "dv" {
		t.Errorf("ConfigMap config: backend %s, engine %s; want the DPU inline scrubber", c.Offload.Backend, c.Software.Engine)
	}
}

func TestK8sProbesHitTheAgent(t *testing.T) {
	c := k8sConfig(t)
	host, port, err := net.SplitHostPort(c.Metrics.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("metrics.listen %s: the kubelet probes the node address, so listen on all addresses", c.Metrics.Listen)
	}
	ctr := agentContainer(t)
	var metricsPort string
	for _, p := range dig(t, ctr, "ports").([]any) {
		if p.(map[string]any)["name"] == "metrics" {
			metricsPort = strconv.Itoa(p.(map[string]any)["containerPort"].(int))
		}
	}
	if metricsPort != port {
		t.Errorf("container port metrics = %q, config metrics.listen port = %q", metricsPort, port)
	}
	ds := readYAML(t, "k8s/daemonset.yaml")
	if a := dig(t, ds, "spec", "template", "metadata", "annotations", "prometheus.io/port"); a != port {
		t.Errorf("prometheus.io/port annotation %v, metrics port %s", a, port)
	}

	srv := httptest.NewServer(metrics.Handler(metrics.NewRegistry(metrics.New(metrics.Sources{Node: "t"}, 10))))
	defer srv.Close()
	paths := []string{dig(t, ds, "spec", "template", "metadata", "annotations", "prometheus.io/path").(string)}
	for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
		paths = append(paths, dig(t, ctr, probe, "httpGet", "path").(string))
		if p := dig(t, ctr, probe, "httpGet", "port"); p != "metrics" {
			t.Errorf("%s port %v, want metrics", probe, p)
		}
	}
	for _, p := range paths {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s on the agent's metrics handler: %s", p, resp.Status)
		}
	}
}

func TestK8sContainerMatchesConfigAndUnit(t *testing.T) {
	c := k8sConfig(t)
	ctr := agentContainer(t)
	var args []string
	for _, a := range dig(t, ctr, "args").([]any) {
		args = append(args, a.(string))
	}
	if !slices.Equal(args, []string{"run", "--config", "/etc/scrubd/scrubd.yaml"}) {
		t.Errorf("args %q", args)
	}
	mounts := map[string]bool{}
	for _, m := range dig(t, ctr, "volumeMounts").([]any) {
		mm := m.(map[string]any)
		if ro, _ := mm["readOnly"].(bool); !ro {
			mounts[mm["mountPath"].(string)] = true
		}
	}
	for _, need := range []string{c.StateDir, filepath.Dir(c.API.Socket)} {
		if !mounts[need] {
			t.Errorf("%s (from the config) is not a writable mount; the root filesystem is read-only", need)
		}
	}
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, cp := range strings.Fields(unitValues(t, unit, "CapabilityBoundingSet")[0]) {
		want = append(want, strings.TrimPrefix(cp, "CAP_"))
	}
	var got []string
	for _, cp := range dig(t, ctr, "securityContext", "capabilities", "add").([]any) {
		got = append(got, cp.(string))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("DaemonSet capabilities %v, systemd unit %v", got, want)
	}
}
