//go:build linux

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestShutdownPhases(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	waitDone := func(t *testing.T, what string, ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not end", what)
		}
	}
	notDone := func(t *testing.T, what string, ctx context.Context) {
		t.Helper()
		select {
		case <-ctx.Done():
			t.Fatalf("%s ended too early: %v", what, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}

	t.Run("the drain ends after the timeout", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		sd := newShutdown(parent, 300*time.Millisecond, false, log)
		defer sd.release()
		notDone(t, "stopping", sd.stopping)
		cancel()
		waitDone(t, "stopping", sd.stopping)
		notDone(t, "the drain", sd.drain)
		waitDone(t, "the drain", sd.drain)
		if !errors.Is(context.Cause(sd.drain), errDrainTimeout) {
			t.Errorf("drain cause %v, want %v", context.Cause(sd.drain), errDrainTimeout)
		}
	})

	t.Run("a second signal ends the drain at once", func(t *testing.T) {
		sd := newShutdown(context.Background(), time.Hour, true, log)
		defer sd.release()
		// signal.Notify is in place once newShutdown returns: the signals
		// reach the channel, not the default action.
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "stopping", sd.stopping)
		notDone(t, "the drain", sd.drain)
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		waitDone(t, "the drain", sd.drain)
		if !errors.Is(context.Cause(sd.drain), errForced) {
			t.Errorf("drain cause %v, want %v", context.Cause(sd.drain), errForced)
		}
		// A third is only logged; the teardown's deadline still comes.
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sd.afterDrain(killGrace):
			t.Fatal("the teardown deadline came before killGrace")
		case <-time.After(200 * time.Millisecond):
		}
	})

	t.Run("start stops without a signal", func(t *testing.T) {
		sd := newShutdown(context.Background(), 0, false, log)
		defer sd.release()
		notDone(t, "stopping", sd.stopping)
		sd.start()
		waitDone(t, "stopping", sd.stopping)
		waitDone(t, "the drain", sd.drain)
	})
}
