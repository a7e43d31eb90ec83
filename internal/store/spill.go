package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A NATS server refuses a message larger than its max_payload (1 MB
// unless configured), and a fleet often shares a cluster whose setting it
// cannot raise. So a record or an event too large for a message spills:
// its bytes go to the PYEXEC_REQUESTS object store, which chunks them,
// and the message carries a small reference instead. Readers resolve the
// reference, so callers of the store see the value they wrote whatever
// the server's limit. With max_payload at 8 MB (the embedded server's)
// nothing below the record limit spills.
//
// A record's reference is its value in the records bucket: spillMarker
// followed by the JSON of a spillRef. A value that itself begins with
// the marker is spilled too, so a stored value that begins with it is
// always a reference. An event's reference is a message with the
// spillHeader header and no data; the object's name is also published
// on the execution's spilledSuffix subject, so that PurgeEvents finds
// every object of an execution without reading its events.
//
// Objects expire with the bucket's TTL, which is the records' and the
// events'. Delete and PurgeEvents remove them at once; a spilled record
// replaced by a later write leaves its former object to the TTL (the
// engine writes a large record once, when the execution ends).

const (
	// MinMaxPayload is the smallest max_payload the store works with: an
	// object store chunk (128 KiB) and its headers must fit a message.
	MinMaxPayload = 256 << 10
	// spillHeadroom is kept free in a message for its subject and headers.
	spillHeadroom = 8 << 10
	// spillHeader names the object holding a spilled event's data.
	spillHeader = "Pyexec-Spilled"
	// spilledSuffix ends the subject listing an execution's spilled
	// events.
	spilledSuffix = ".spilled"
)

// spillMarker starts a record value that refers to a spilled one.
var spillMarker = []byte("\x00pyexec-spilled\x00")

// spillRef names a spilled value.
type spillRef struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// fits reports whether a value of n bytes travels in a message of the
// server this node is connected to.
func (s *NATS) fits(n int) bool { return int64(n) <= s.nc.MaxPayload()-spillHeadroom }

// spill stores data as a new object named prefix/<random>.
func (s *NATS) spill(ctx context.Context, prefix string, data []byte) (spillRef, error) {
	ref := spillRef{Name: prefix + "/" + rand.Text(), Size: len(data)}
	if _, err := s.requests.PutBytes(ctx, ref.Name, data); err != nil {
		return spillRef{}, fmt.Errorf("storing %d bytes too large for a message: %w", len(data), mapErr(err))
	}
	return ref, nil
}

// unspill reads a spilled value back; ErrNotFound when it is gone.
func (s *NATS) unspill(ctx context.Context, ref spillRef) ([]byte, error) {
	b, err := s.requests.GetBytes(ctx, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("reading spilled value %s: %w", ref.Name, mapErr(err))
	}
	if len(b) != ref.Size {
		return nil, fmt.Errorf("spilled value %s has %d bytes, its reference says %d", ref.Name, len(b), ref.Size)
	}
	return b, nil
}

// dropSpilled deletes a spilled value; one already gone is no error.
func (s *NATS) dropSpilled(ctx context.Context, name string) error {
	err := s.requests.Delete(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("deleting spilled value %s: %w", name, mapErr(err))
	}
	return nil
}

// recordValue is what the records bucket stores for value: value itself,
// or a reference to its spilled copy (then ref is set, for the caller to
// drop should the write fail). Values above MaxRecordBytes are refused.
func (s *NATS) recordValue(ctx context.Context, key string, value []byte) (stored []byte, ref *spillRef, err error) {
	if len(value) > int(s.cfg.MaxRecordBytes) {
		return nil, nil, fmt.Errorf("%w: record of %d bytes, the limit is %d", ErrTooLarge, len(value), s.cfg.MaxRecordBytes)
	}
	if s.fits(len(value)) && !bytes.HasPrefix(value, spillMarker) {
		return value, nil, nil
	}
	r, err := s.spill(ctx, "record/"+key, value)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, nil, err
	}
	return append(bytes.Clone(spillMarker), b...), &r, nil
}

// recordRef returns the reference a stored record value holds, if any.
func recordRef(stored []byte) (spillRef, bool, error) {
	rest, ok := bytes.CutPrefix(stored, spillMarker)
	if !ok {
		return spillRef{}, false, nil
	}
	var r spillRef
	if err := json.Unmarshal(rest, &r); err != nil {
		return spillRef{}, true, fmt.Errorf("unreadable reference to a spilled record: %w", err)
	}
	return r, true, nil
}

// resolveRecord returns the value a stored record value stands for.
func (s *NATS) resolveRecord(ctx context.Context, stored []byte) ([]byte, error) {
	r, ok, err := recordRef(stored)
	if !ok || err != nil {
		return stored, err
	}
	return s.unspill(ctx, r)
}

// eventMsg builds the message of one event of id: data itself, or, when
// too large, a reference to its spilled copy, whose name is published on
// the execution's spilled subject first.
func (s *NATS) eventMsg(ctx context.Context, id string, data []byte) (*nats.Msg, error) {
	m := nats.NewMsg(EventsPrefix + id)
	if s.fits(len(data)) {
		m.Data = data
		return m, nil
	}
	r, err := s.spill(ctx, "event/"+id, data)
	if err != nil {
		return nil, err
	}
	if _, err := s.js.Publish(ctx, EventsPrefix+id+spilledSuffix, []byte(r.Name)); err != nil {
		return nil, errors.Join(mapErr(err), s.dropSpilled(ctx, r.Name))
	}
	m.Header.Set(spillHeader, r.Name)
	return m, nil
}

// eventData returns the data of a stored event: the message's own, or
// its spilled copy.
func (s *NATS) eventData(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	name := h.Get(spillHeader)
	if name == "" {
		return data, nil
	}
	b, err := s.requests.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("reading spilled event %s: %w", name, mapErr(err))
	}
	return b, nil
}

// dropSpilledEvents deletes the spilled data of id's events.
func (s *NATS) dropSpilledEvents(ctx context.Context, id string) error {
	subject := EventsPrefix + id + spilledSuffix
	for seq := uint64(1); ; {
		msg, err := s.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("listing spilled events of %s: %w", id, mapErr(err))
		}
		if err := s.dropSpilled(ctx, string(msg.Data)); err != nil {
			return err
		}
		seq = msg.Sequence + 1
	}
	if err := s.events.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return fmt.Errorf("purging spilled events of %s: %w", id, mapErr(err))
	}
	return nil
}
