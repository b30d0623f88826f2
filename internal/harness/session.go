package harness

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
)

// TB is what running a third-party process (StartCertManager, StartDNSServer,
// StartExternalDNS) needs of its caller: a test (testing.TB has it all) or a Session.
type TB interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Session is a program's run as the processes it starts see it, for callers with no
// test of their own: a test binary's TestMain (processes shared by all its tests) and
// the demo. Fatal panics with a *SessionFatal, which the caller recovers (Run); Close
// stops the processes, last started first, and prints their logs' ends when the run
// failed.
type Session struct {
	mu       sync.Mutex
	dir      string
	cleanups []func()
	failed   bool
	log      io.Writer
}

// SessionFatal is the panic value of Session.Fatal.
type SessionFatal struct{ Msg string }

// NewSession returns a Session keeping its files under a new temporary directory and
// logging to log (os.Stderr when nil).
func NewSession(name string, log io.Writer) (*Session, error) {
	dir, err := os.MkdirTemp("", "anchorage-"+name+"-")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = os.Stderr
	}
	return &Session{dir: dir, log: log}, nil
}

// Run calls start, turning a Fatal inside it into an error.
func (s *Session) Run(start func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(*SessionFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", f.Msg)
		}
	}()
	start()
	return nil
}

// Close runs the cleanups, last registered first; failed marks the run failed first,
// so processes print their logs' ends.
func (s *Session) Close(failed bool) {
	s.mu.Lock()
	s.failed = s.failed || failed
	cleanups := slices.Clone(s.cleanups)
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	_ = os.RemoveAll(s.dir)
}

func (s *Session) Helper() {}

// TempDir returns a new directory under the session's.
func (s *Session) TempDir() string {
	dir, err := os.MkdirTemp(s.dir, "")
	if err != nil {
		s.Fatal(err)
	}
	return dir
}

func (s *Session) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *Session) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Session) Logf(format string, args ...any) { fmt.Fprintf(s.log, format+"\n", args...) }

func (s *Session) Fatal(args ...any) { s.fail(fmt.Sprint(args...)) }

func (s *Session) Fatalf(format string, args ...any) { s.fail(fmt.Sprintf(format, args...)) }

func (s *Session) fail(msg string) {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
	panic(&SessionFatal{Msg: msg})
}
