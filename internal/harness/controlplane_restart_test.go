package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/app"
)

func TestParentPIDCountsFieldsAfterTheCommandName(t *testing.T) {
	cases := []struct {
		reason string
		stat   string
		want   int
		ok     bool
	}{
		{"plain name", "4242 (kube-apiserver) S 17 4242 1 0", 17, true},
		{"name with spaces and parentheses", "4242 (a) b (c) R 99 4242 1 0", 99, true},
		{"no command name", "4242 S 17", 0, false},
		{"truncated after the name", "4242 (x) S", 0, false},
	}
	for _, c := range cases {
		got, err := parentPID(c.stat)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s: parentPID(%q) = %d, %v; want %d, ok=%v", c.reason, c.stat, got, err, c.want, c.ok)
		}
	}
}

func TestSplitCmdlineDropsTheFinalNUL(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"kube-apiserver\x00", []string{"kube-apiserver"}},
		{"/bin/kube-apiserver\x00--secure-port=1\x00--cert-dir=/tmp/a b\x00", []string{"/bin/kube-apiserver", "--secure-port=1", "--cert-dir=/tmp/a b"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
	}
	for _, c := range cases {
		if got := splitCmdline([]byte(c.in)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitCmdline(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestIsPlaneAPIServerNeedsBothPortAndCertDir(t *testing.T) {
	const bin = "/assets/kube-apiserver"
	cases := []struct {
		reason string
		argv   []string
		want   bool
	}{
		{"this plane's server", []string{bin, "--cert-dir=/c", "--secure-port=8443"}, true},
		{"another plane's port", []string{bin, "--cert-dir=/c", "--secure-port=8444"}, false},
		{"a port that only starts with ours", []string{bin, "--cert-dir=/c", "--secure-port=84430"}, false},
		{"another plane's cert dir", []string{bin, "--cert-dir=/d", "--secure-port=8443"}, false},
		{"etcd with the same flags", []string{"/assets/etcd", "--cert-dir=/c", "--secure-port=8443"}, false},
		{"empty command line", nil, false},
	}
	for _, c := range cases {
		if got := isPlaneAPIServer(c.argv, "8443", "/c"); got != c.want {
			t.Errorf("%s: isPlaneAPIServer(%q) = %v, want %v", c.reason, c.argv, got, c.want)
		}
	}
}

// TestRestartedAPIServerKeepsEtcdAndClients kills the plane's kube-apiserver, shows it
// down, starts it again and reads back what was written before through clients built
// before the kill: same etcd, port, serving CA and users. A second restart kills the
// harness's own process, and Stop stops the last one.
func TestRestartedAPIServerKeepsEtcdAndClients(t *testing.T) {
	plane, err := StartControlPlane("restart", PlaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin := plane.Client
	userCfg, _, err := plane.User("held-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	user, err := client.New(userCfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	before := configMap("before")
	if err := admin.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	auditOffset := fileSize(t, plane.AuditLogPath)
	firstPID := planeAPIServerPID(t, plane)

	if err := plane.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(firstPID))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("kube-apiserver %d still in /proc after KillAPIServer: %v", firstPID, err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(before), &corev1.ConfigMap{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read while the server is down: got %v, want connection refused", err)
	}
	started := time.Now()
	if err := plane.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("StartAPIServer took %s", time.Since(started).Round(time.Millisecond))
	secondPID := planeAPIServerPID(t, plane)
	if secondPID == firstPID {
		t.Fatalf("kube-apiserver pid %d unchanged by the restart", firstPID)
	}

	expectSameConfigMap(ctx, t, admin, before)
	expectSameConfigMap(ctx, t, user, before)
	if err := admin.Create(ctx, configMap("after")); err != nil {
		t.Fatalf("create after the restart: %v", err)
	}
	expectAuditAppended(t, plane.AuditLogPath, auditOffset)

	if err := plane.RestartAPIServer(ctx, 200*time.Millisecond); err != nil {
		t.Fatalf("second restart: %v", err)
	}
	thirdPID := planeAPIServerPID(t, plane)
	if thirdPID == secondPID {
		t.Fatalf("kube-apiserver pid %d unchanged by the second restart", secondPID)
	}
	expectSameConfigMap(ctx, t, user, before)
	if err := user.Get(ctx, client.ObjectKey{Namespace: "default", Name: "after"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("read after the second restart: %v", err)
	}

	if err := plane.Stop(); err != nil {
		t.Fatalf("Stop after restarts: %v", err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(thirdPID))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restarted kube-apiserver %d still in /proc after Stop: %v", thirdPID, err)
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Data:       map[string]string{"written": name},
	}
}

// expectSameConfigMap reads want back through c and fails unless it is the very
// object written: same UID, resourceVersion and data.
func expectSameConfigMap(ctx context.Context, t *testing.T, c client.Client, want *corev1.ConfigMap) {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatalf("reading %s after the restart: %v", want.Name, err)
	}
	if got.UID != want.UID || got.ResourceVersion != want.ResourceVersion || !reflect.DeepEqual(got.Data, want.Data) {
		t.Fatalf("%s after the restart: uid %s rv %s data %v; before: uid %s rv %s data %v",
			want.Name, got.UID, got.ResourceVersion, got.Data, want.UID, want.ResourceVersion, want.Data)
	}
}

// expectAuditAppended checks the restarted server appended to the audit log: the
// create before the kill is still at its place, the one after it lies past offset.
func expectAuditAppended(t *testing.T, path string, offset int64) {
	t.Helper()
	created := func(events []AuditEvent, name string) bool {
		for _, e := range events {
			if e.Verb == "create" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == name {
				return true
			}
		}
		return false
	}
	all, err := ReadAuditLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	later, err := ReadAuditLog(path, offset)
	if err != nil {
		t.Fatal(err)
	}
	if !created(all, "before") || created(later, "before") || !created(later, "after") {
		t.Fatalf("audit log not appended across the restart: create of before in whole log %v, past offset %d %v; create of after past offset %v",
			created(all, "before"), offset, created(later, "before"), created(later, "after"))
	}
}

func planeAPIServerPID(t *testing.T, p *ControlPlane) int {
	t.Helper()
	api := p.Env.ControlPlane.APIServer
	pid, err := findChildAPIServer(os.Getpid(), api.SecureServing.Port, api.CertDir)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestLeanPlaneKeepsItsSettingsAcrossARestart: a lean plane's kube-apiserver and etcd
// run with the lean flags and serve, and the API server started again after a kill gets
// the same flags.
func TestLeanPlaneKeepsItsSettingsAcrossARestart(t *testing.T) {
	plane, err := StartControlPlane("lean", PlaneOptions{Lean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	expectFlags := func(when string, pid int, name string, flags map[string]string) {
		t.Helper()
		_, args, err := processCommand(pid)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range flags {
			if !slices.Contains(args, "--"+k+"="+v) {
				t.Errorf("%s: %s runs without --%s=%s: %q", when, name, k, v, args)
			}
		}
	}
	expectFlags("started", planeAPIServerPID(t, plane), "kube-apiserver", leanAPIServerArgs)
	expectFlags("started", childEtcdPID(t), "etcd", leanEtcdArgs)
	written := configMap("lean")
	if err := plane.Client.Create(ctx, written); err != nil {
		t.Fatal(err)
	}
	if err := plane.RestartAPIServer(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	expectFlags("restarted", planeAPIServerPID(t, plane), "kube-apiserver", leanAPIServerArgs)
	expectSameConfigMap(ctx, t, plane.Client, written)
}

// childEtcdPID returns the pid of the one etcd this test process started.
func childEtcdPID(t *testing.T) int {
	t.Helper()
	found, err := childProcesses(os.Getpid(), func(argv []string) bool {
		return len(argv) > 0 && filepath.Base(argv[0]) == "etcd"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("want one etcd child of this test, found %v", found)
	}
	return found[0]
}
