package validate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Set is every object found in a set of manifest files.
type Set struct {
	DaemonSets      []*appsv1.DaemonSet
	ConfigMaps      []*corev1.ConfigMap
	ServiceAccounts []*corev1.ServiceAccount
	Namespaces      []*corev1.Namespace
}

// Error is one problem in one document.
type Error struct {
	File string
	Doc  int // 1-based document index in the file
	Kind string
	Name string
	Msg  string
}

func (e *Error) Error() string {
	where := fmt.Sprintf("%s (document %d", e.File, e.Doc)
	if e.Kind != "" {
		where += ", " + e.Kind
		if e.Name != "" {
			where += " " + e.Name
		}
	}
	return where + "): " + e.Msg
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// LoadDir decodes every *.yaml and *.yml file directly in dir.
func LoadDir(dir string) (*Set, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no manifests", dir)
	}
	s := &Set{}
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := s.Add(filepath.Base(f), data); err != nil {
			errs = append(errs, err)
		}
	}
	return s, errors.Join(errs...)
}

// Add decodes every document of one file strictly into its API type.
// Unknown fields, wrong types, unparsable quantities and unknown kinds are
// errors.
func (s *Set) Add(file string, data []byte) error {
	var errs []error
	for i, doc := range docSep.Split(string(data), -1) {
		if isBlank(doc) {
			continue
		}
		bad := func(kind, name, format string, args ...any) {
			errs = append(errs, &Error{File: file, Doc: i + 1, Kind: kind, Name: name, Msg: fmt.Sprintf(format, args...)})
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			bad("", "", "not YAML: %v", err)
			continue
		}
		var obj any
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/DaemonSet":
			o := &appsv1.DaemonSet{}
			s.DaemonSets, obj = append(s.DaemonSets, o), o
		case "v1/ConfigMap":
			o := &corev1.ConfigMap{}
			s.ConfigMaps, obj = append(s.ConfigMaps, o), o
		case "v1/ServiceAccount":
			o := &corev1.ServiceAccount{}
			s.ServiceAccounts, obj = append(s.ServiceAccounts, o), o
		case "v1/Namespace":
			o := &corev1.Namespace{}
			s.Namespaces, obj = append(s.Namespaces, o), o
		default:
			bad(tm.Kind, "", "apiVersion %q kind %q: not a kind this validator knows", tm.APIVersion, tm.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			bad(tm.Kind, "", "%v", err)
		}
	}
	return errors.Join(errs...)
}

func isBlank(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// Check runs the consistency checks the API server and the kubelet would
// otherwise only do at apply or start time, plus what scrubd needs.
func (s *Set) Check() error {
	var errs []error
	bad := func(kind, name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: %s", kind, name, fmt.Sprintf(format, args...)))
	}
	names := func(kind string, m *metav1.ObjectMeta, namespaced bool) {
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			bad(kind, m.Name, "metadata.name: %s", msg)
		}
		if namespaced {
			if m.Namespace == "" {
				bad(kind, m.Name, "metadata.namespace: required (manifests must not depend on the current context)")
			} else if !s.hasNamespace(m.Namespace) {
				bad(kind, m.Name, "metadata.namespace %q: no Namespace manifest", m.Namespace)
			}
		}
		labels(func(f string, a ...any) { bad(kind, m.Name, f, a...) }, "metadata.labels", m.Labels)
	}
	for _, n := range s.Namespaces {
		names("Namespace", &n.ObjectMeta, false)
	}
	for _, sa := range s.ServiceAccounts {
		names("ServiceAccount", &sa.ObjectMeta, true)
	}
	for _, cm := range s.ConfigMaps {
		names("ConfigMap", &cm.ObjectMeta, true)
		for k := range cm.Data {
			for _, msg := range validation.IsConfigMapKey(k) {
				bad("ConfigMap", cm.Name, "data key %q: %s", k, msg)
			}
		}
	}
	if len(s.DaemonSets) == 0 {
		errs = append(errs, errors.New("no DaemonSet"))
	}
	for _, ds := range s.DaemonSets {
		names("DaemonSet", &ds.ObjectMeta, true)
		for _, msg := range s.checkDaemonSet(ds) {
			bad("DaemonSet", ds.Name, "%s", msg)
		}
	}
	return errors.Join(errs...)
}

func labels(bad func(string, ...any), field string, m map[string]string) {
	for k, v := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			bad("%s key %q: %s", field, k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			bad("%s[%q] value %q: %s", field, k, v, msg)
		}
	}
}

func (s *Set) hasNamespace(n string) bool {
	return slices.ContainsFunc(s.Namespaces, func(ns *corev1.Namespace) bool { return ns.Name == n })
}

// Capabilities is the set the agent's container must add (and nothing
// else): the same as deploy/systemd/scrubd.service.
var Capabilities = []corev1.Capability{"NET_ADMIN", "BPF", "PERFMON", "NET_RAW", "IPC_LOCK", "NET_BIND_SERVICE"}

func (s *Set) checkDaemonSet(ds *appsv1.DaemonSet) []string {
	var msgs []string
	bad := func(f string, a ...any) { msgs = append(msgs, fmt.Sprintf(f, a...)) }
	spec, pod := &ds.Spec, &ds.Spec.Template.Spec

	// What the API server checks on apply.
	if spec.Selector == nil || len(spec.Selector.MatchLabels) == 0 {
		bad("spec.selector.matchLabels: required")
	} else {
		for k, v := range spec.Selector.MatchLabels {
			if ds.Spec.Template.Labels[k] != v {
				bad("spec.selector %s=%s does not match the template's labels", k, v)
			}
		}
	}
	labels(bad, "spec.template.metadata.labels", ds.Spec.Template.Labels)
	labels(bad, "spec.template.spec.nodeSelector", pod.NodeSelector)
	if len(pod.Containers) == 0 {
		bad("no containers")
	}
	vols := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		if vols[v.Name] != nil {
			bad("volume %q defined twice", v.Name)
		}
		vols[v.Name] = v
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			bad("volume %q: %s", v.Name, msg)
		}
	}
	used := map[string]bool{}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		ports := map[string]int32{}
		for _, p := range c.Ports {
			if p.Name != "" {
				ports[p.Name] = p.ContainerPort
			}
		}
		mounts := map[string]bool{}
		for _, m := range c.VolumeMounts {
			used[m.Name] = true
			if vols[m.Name] == nil {
				bad("container %s: volumeMount %q: no such volume", c.Name, m.Name)
			}
			if mounts[m.MountPath] {
				bad("container %s: mountPath %s used twice", c.Name, m.MountPath)
			}
			mounts[m.MountPath] = true
		}
		for what, p := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil {
				continue
			}
			port := p.HTTPGet.Port
			if port.StrVal != "" {
				if _, ok := ports[port.StrVal]; !ok {
					bad("container %s: %s port %q: no container port of that name", c.Name, what, port.StrVal)
				}
			} else if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == port.IntVal }) {
				bad("container %s: %s port %d: not a container port", c.Name, what, port.IntVal)
			}
		}
		// Hugepages: the API server requires requests == limits and a cpu
		// or memory request beside them.
		hugeReq := false
		for name, q := range c.Resources.Requests {
			if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				hugeReq = true
				if l, ok := c.Resources.Limits[name]; !ok || l.Cmp(q) != 0 {
					bad("container %s: %s request %s differs from its limit", c.Name, name, q.String())
				}
			}
		}
		if hugeReq {
			_, cpu := c.Resources.Requests[corev1.ResourceCPU]
			_, mem := c.Resources.Requests[corev1.ResourceMemory]
			if !cpu && !mem {
				bad("container %s: hugepages need a cpu or memory request", c.Name)
			}
		}
		for name, l := range c.Resources.Limits {
			if r, ok := c.Resources.Requests[name]; ok && r.Cmp(l) > 0 {
				bad("container %s: %s request %s above its limit %s", c.Name, name, r.String(), l.String())
			}
		}
	}
	for n := range vols {
		if !used[n] {
			bad("volume %q is mounted by no container", n)
		}
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := s.configMap(ds.Namespace, v.ConfigMap.Name)
		if cm == nil {
			bad("volume %q: ConfigMap %s/%s is not in the manifests", v.Name, ds.Namespace, v.ConfigMap.Name)
			continue
		}
		for _, it := range v.ConfigMap.Items {
			if _, ok := cm.Data[it.Key]; !ok {
				bad("volume %q: ConfigMap %s has no key %q", v.Name, cm.Name, it.Key)
			}
		}
	}
	if sa := pod.ServiceAccountName; sa != "" && !slices.ContainsFunc(s.ServiceAccounts, func(x *corev1.ServiceAccount) bool {
		return x.Name == sa && x.Namespace == ds.Namespace
	}) {
		bad("serviceAccountName %q: no such ServiceAccount in %s", sa, ds.Namespace)
	}

	// What scrubd needs.
	if !pod.HostNetwork {
		bad("hostNetwork must be true: the agent programs the node's netdevs")
	}
	if len(pod.NodeSelector) == 0 {
		bad("nodeSelector: required (DPU nodes only)")
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil {
			bad("container %s: securityContext.capabilities: required", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad("container %s: privileged: the capability set is the gate, not privileged mode", c.Name)
		}
		if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			bad("container %s: capabilities.drop = %v, want [ALL]", c.Name, sc.Capabilities.Drop)
		}
		add := slices.Clone(sc.Capabilities.Add)
		want := slices.Clone(Capabilities)
		slices.Sort(add)
		slices.Sort(want)
		if !slices.Equal(add, want) {
			bad("container %s: capabilities.add = %v, want %v", c.Name, sc.Capabilities.Add, Capabilities)
		}
		q, ok := c.Resources.Limits[corev1.ResourceName(corev1.ResourceHugePagesPrefix+"2Mi")]
		if !ok || q.Cmp(resource.MustParse("0")) <= 0 {
			bad("container %s: no hugepages-2Mi limit (the software path's buffer pools)", c.Name)
		}
		mounted := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounted[m.MountPath] = m.Name
		}
		for path, why := range map[string]string{"/sys/fs/bpf": "bpffs (pinned XDP maps and links)", "/sys": "sysfs", "/etc/scrubd": "config"} {
			if mounted[path] == "" {
				bad("container %s: nothing mounted at %s (%s)", c.Name, path, why)
			}
		}
		if v := vols[mounted["/sys/fs/bpf"]]; v != nil {
			if v.HostPath == nil || v.HostPath.Path != "/sys/fs/bpf" {
				bad("container %s: /sys/fs/bpf must be the host's bpffs (hostPath /sys/fs/bpf)", c.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/sys/fs/bpf" && m.ReadOnly {
				bad("container %s: /sys/fs/bpf is read-only: pins cannot be made", c.Name)
			}
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
			bad("container %s: no HTTP liveness probe", c.Name)
		}
	}
	return msgs
}

func (s *Set) configMap(ns, name string) *corev1.ConfigMap {
	for _, c := range s.ConfigMaps {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}
