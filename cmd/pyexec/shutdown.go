//go:build linux

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// killGrace bounds the teardown once the drain has ended: stopping the
// executions still running, recording them, ending warm jails and fork
// servers and removing their cgroups. Whatever is still running then is
// killed through its cgroup and serve returns anyway.
const killGrace = 10 * time.Second

// Why the drain ended (context.Cause of shutdown.drain).
var (
	errDrainTimeout = errors.New("shutdown timeout reached")
	errForced       = errors.New("stop forced by a second signal")
)

// shutdown is how a server stops, in two phases. stopping ends at the first
// SIGTERM or SIGINT (or when the parent context ends): the server stops
// taking requests and work, and running executions may finish. drain ends
// timeout later, or at once at a second signal: executions still running
// are stopped and recorded as failed/node_lost. Further signals are only
// logged: the rest of the teardown is bounded by killGrace.
type shutdown struct {
	stopping context.Context
	drain    context.Context
	timeout  time.Duration

	begin    context.CancelFunc
	endDrain context.CancelCauseFunc
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// newShutdown starts watching parent and, with signals, SIGTERM and SIGINT.
// release must be called once the server has stopped.
func newShutdown(parent context.Context, timeout time.Duration, signals bool, log *slog.Logger) *shutdown {
	stopping, begin := context.WithCancel(parent)
	drain, endDrain := context.WithCancelCause(context.Background())
	sd := &shutdown{stopping: stopping, drain: drain, timeout: timeout, begin: begin, endDrain: endDrain,
		quit: make(chan struct{}), done: make(chan struct{})}
	sigs := make(chan os.Signal, 4)
	if signals {
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	}
	go sd.watch(sigs, log)
	return sd
}

func (sd *shutdown) watch(sigs chan os.Signal, log *slog.Logger) {
	defer close(sd.done)
	defer signal.Stop(sigs)
	select {
	case s := <-sigs:
		log.Info("stopping: no new work; running executions may finish", "signal", s.String(), "shutdown_timeout", sd.timeout)
	case <-sd.stopping.Done():
	case <-sd.quit:
		return
	}
	sd.begin()
	t := time.NewTimer(sd.timeout)
	defer t.Stop()
	select {
	case <-t.C:
		sd.endDrain(errDrainTimeout)
	case s := <-sigs:
		log.Warn("second signal: stopping running executions now", "signal", s.String())
		sd.endDrain(errForced)
	case <-sd.quit:
		return
	}
	for {
		select {
		case s := <-sigs:
			log.Warn("already stopping: everything still running is being killed", "signal", s.String(), "within", killGrace)
		case <-sd.quit:
			return
		}
	}
}

// start begins the stop without a signal (the server failed on its own).
func (sd *shutdown) start() { sd.begin() }

// afterDrain is closed d after the drain ended.
func (sd *shutdown) afterDrain(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		select {
		case <-sd.drain.Done():
		case <-sd.quit:
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			close(c)
		case <-sd.quit:
		}
	}()
	return c
}

// release stops watching signals and ends both phases.
func (sd *shutdown) release() {
	sd.once.Do(func() {
		close(sd.quit)
		<-sd.done
		sd.begin()
		sd.endDrain(context.Canceled)
	})
}
