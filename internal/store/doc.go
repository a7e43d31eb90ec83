// Package store keeps the shared state of pyexec on NATS JetStream:
// execution records (a KV bucket with a TTL) and their index (a second KV
// bucket of small entries that every node mirrors in memory, index.go),
// request payloads (an object
// store), the durable async work queue (a work-queue stream), live events
// (subjects captured by a stream so they can be replayed), kill control
// (request/reply subjects) and the audit trail (a stream).
//
// The package deals in keys and bytes only. It never imports the engine and
// knows nothing about what an execution is; the engine encodes its records,
// gives each the labels the index filters on (Meta) and decides what a
// state transition means. The small interfaces in
// interfaces.go are what a backend must provide; NATS implements them on any
// JetStream connection, so the same code runs on the embedded server that
// StartEmbedded starts or on an external cluster.
//
// It is kept as one package because its files are, most of them, one
// bucket or stream each (records, index, requests, queue, events, audit,
// artifacts, snapshots, sessions, members) of the same JetStream
// connection, and share it, its error mapping (ErrConflict, ErrNotFound)
// and the setup of the embedded server or the cluster; each file is small.
package store
