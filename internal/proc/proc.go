// Package proc runs a child process the way the demo and the bench harness run manager
// replicas: its own process group (an interrupt of the parent reaches only the parent,
// which then stops its children in order), output to a log file, and the signals a
// fault schedule needs.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one started child process.
type Process struct {
	// Name is used in errors.
	Name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts bin with args, its stdout and stderr appended to logPath.
func Start(name, bin, logPath string, args ...string) (*Process, error) {
	return StartEnv(name, bin, logPath, nil, args...)
}

// StartEnv is Start with env ("KEY=value") added to this process's environment.
func StartEnv(name, bin, logPath string, env []string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Process{Name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Signal sends s; an exited process is an error.
func (p *Process) Signal(s syscall.Signal) error {
	if !p.Running() {
		return fmt.Errorf("%s has exited", p.Name)
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	return nil
}

// Kill sends SIGKILL (no graceful anything) and waits for the exit.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.exited
	return nil
}

// Terminate sends SIGTERM and waits up to grace for the exit, then kills. It does
// nothing to a process that has exited.
func (p *Process) Terminate(grace time.Duration) {
	if p.Signal(syscall.SIGTERM) != nil {
		return
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}
