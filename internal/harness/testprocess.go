package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"anchorage/internal/proc"
)

// processLogTail is how much of a third-party process's log a failed test prints: the
// end, where the reason is, without flooding the output of a long run.
const processLogTail = 64 << 10

// testProcess is a third-party program (cert-manager, external-dns, a DNS server) that
// one test runs beside its API server. Its output goes to a file under the test's temp
// dir and is printed only when the test fails, so a passing run stays readable.
type testProcess struct {
	name string
	log  string
	p    *proc.Process
}

// startTestProcess starts bin with args (env added to this process's environment) and
// stops it when the test ends, before the temp dir holding its log is removed.
func startTestProcess(t TB, name, bin string, env []string, args ...string) (*testProcess, error) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	p, err := proc.StartEnv(name, bin, logPath, env, args...)
	if err != nil {
		return nil, err
	}
	tp := &testProcess{name: name, log: logPath, p: p}
	t.Cleanup(func() {
		p.Terminate(10 * time.Second)
		if t.Failed() {
			t.Logf("%s's log (%s), its last %d KiB:\n%s", name, bin, processLogTail>>10, fileTail(logPath, processLogTail))
		}
	})
	return tp, nil
}

// exited returns an error holding the end of the log once the process has exited, and
// nil while it runs: what a wait on the process's work reports instead of a timeout.
func (p *testProcess) exited() error {
	if p.p.Running() {
		return nil
	}
	return fmt.Errorf("%s exited; its log ends:\n%s", p.name, fileTail(p.log, 4096))
}

// freeLoopbackPort returns a loopback TCP port nothing listens on now, for a program
// that cannot report the port it bound. Another process may take it before the program
// binds it; the program then exits, and its log says so.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeKubeconfig writes cfg as a kubeconfig file in dir, for a program that takes a
// --kubeconfig path.
func writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	kc, err := KubeconfigVia(cfg, "")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}
