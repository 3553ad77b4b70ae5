package validate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const manifests = ".."

func TestManifests(t *testing.T) {
	s, err := LoadDir(manifests)
	if err != nil {
		t.Fatalf("decoding the manifests:\n%v", err)
	}
	if len(s.DaemonSets) != 1 || len(s.ConfigMaps) != 1 || len(s.ServiceAccounts) != 1 || len(s.Namespaces) != 1 {
		t.Fatalf("found %d DaemonSets, %d ConfigMaps, %d ServiceAccounts, %d Namespaces; want one of each",
			len(s.DaemonSets), len(s.ConfigMaps), len(s.ServiceAccounts), len(s.Namespaces))
	}
	if err := s.Check(); err != nil {
		t.Fatalf("checking the manifests:\n%v", err)
	}
}

// Every check must be able to fail: each broken copy of the manifests is
// refused, with a message naming the problem.
func TestManifestMistakesAreCaught(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifests, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob: %v %v", files, err)
	}
	orig := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		orig[filepath.Base(f)] = string(b)
	}
	cases := []struct {
		name, file, old, new, want string
	}{
		{"unknown field", "daemonset.yaml", "      hostNetwork: true", "      hostNetwrok: true", `unknown field "hostNetwrok"`},
		{"wrong type", "daemonset.yaml", "      terminationGracePeriodSeconds: 30", "      terminationGracePeriodSeconds: thirty", "terminationGracePeriodSeconds"},
		{"bad quantity", "daemonset.yaml", "              hugepages-2Mi: 2Gi\n              rdma", "              hugepages-2Mi: 2 gigs\n              rdma", "quantities must match"},
		{"hugepages request != limit", "daemonset.yaml", "              hugepages-2Mi: 2Gi\n              rdma/hca_shared_devices_a: \"1\"\n            limits:", "              hugepages-2Mi: 1Gi\n              rdma/hca_shared_devices_a: \"1\"\n            limits:", "differs from its limit"},
		{"mount of a missing volume", "daemonset.yaml", "            - name: bpffs\n              mountPath", "            - name: bpfs\n              mountPath", `volumeMount "bpfs": no such volume`},
		{"probe on an unknown port", "daemonset.yaml", "              path: /healthz\n              port: metrics\n            periodSeconds: 10", "              path: /healthz\n              port: metric\n            periodSeconds: 10", `port "metric"`},
		{"selector not matching", "daemonset.yaml", "    matchLabels:\n      app.kubernetes.io/name: scrubd", "    matchLabels:\n      app.kubernetes.io/name: scrub", "does not match"},
		{"extra capability", "daemonset.yaml", `"NET_BIND_SERVICE"]`, `"NET_BIND_SERVICE", "SYS_ADMIN"]`, "capabilities.add"},
		{"no host network", "daemonset.yaml", "      hostNetwork: true", "      hostNetwork: false", "hostNetwork must be true"},
		{"read-only bpffs", "daemonset.yaml", "              mountPath: /sys/fs/bpf", "              mountPath: /sys/fs/bpf\n              readOnly: true", "read-only"},
		{"missing ConfigMap key", "daemonset.yaml", "              - key: rules.yaml", "              - key: rule.yaml", `no key "rule.yaml"`},
		{"ServiceAccount elsewhere", "serviceaccount.yaml", "  namespace: scrubd-system", "  namespace: default", "no Namespace manifest"},
		{"unknown kind", "serviceaccount.yaml", "kind: ServiceAccount", "kind: ServiceAcount", "not a kind this validator knows"},
		{"bad label value", "daemonset.yaml", `        scrubd/dpu: "true"`, `        scrubd/dpu: "yes please"`, "nodeSelector"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(orig[c.file], c.old) {
				t.Fatalf("%s has no %q to break", c.file, c.old)
			}
			dir := t.TempDir()
			for name, text := range orig {
				if name == c.file {
					text = strings.Replace(text, c.old, c.new, 1)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := LoadDir(dir)
			if err == nil {
				err = s.Check()
			}
			if err == nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not mention %q:\n%v", c.want, err)
			}
		})
	}
}
