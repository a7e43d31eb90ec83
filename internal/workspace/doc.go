// Package workspace keeps workspaces: named file trees that belong to an
// API key, outlive the runs and sessions that use them, and are versioned.
//
// It owns workspaces as data — their records, their versions, the content
// of their files — and everything a node needs to hand one to a run:
//
//   - A version is a manifest (path → content hash, size, mode, mtime) cut
//     into content-addressed pages, so that changing one file of 10,000
//     stores that file, one page and a small root (manifest.go). File
//     contents are blobs named by their SHA-256, stored once however many
//     versions and workspaces hold them.
//   - Records and blobs are kept of record by a small pair of interfaces
//     (store.go): on one node the local disk (records in files, blobs in the
//     node's cache directory, no NATS round trip for data); in a fleet a
//     JetStream KV bucket and object store, with each node's cache fetching
//     only the blobs it lacks (store_nats.go).
//   - A run gets a version materialised once per node as a read-only tree of
//     hard links into the blob cache (the overlay's lower layer; after a
//     commit on the node, derived from the base's tree by the changed
//     paths alone, derive.go) and a size-capped tmpfs for its upper and
//     work directories (Prepare); what
//     the run left in the upper directory is scanned into a change set and
//     committed against the version it started from (Mount.Commit). Changes
//     to paths nobody else changed since apply cleanly; a path changed by an
//     earlier commit too is a conflict reported per file, the later writer's
//     content kept beside it (merge.go).
//   - File operations for the API: list, read, write, upload a tar, download
//     a tar of a folder, delete, restore a version — each a change set
//     committed the same way.
//
// Every call takes the caller and answers ErrNotFound for another key's
// workspace, exactly as for one that does not exist; operator callers see
// all. Paths from users, from tar archives and from what a run left behind
// are untrusted: they are checked as uploads are (no absolute paths, no
// "..", no links out, no devices, FIFOs or sockets, sizes held to the
// quota before anything is read), and the run's upper directory is read
// through an os.Root.
//
// The package never imports the engine or the API, and of the jail only
// the type that names what a jail mounts: the jail mounts the overlay from
// the directories Prepare returns (Mount.Jail), and the engine decides when
// to prepare and commit. It never mounts an overlay itself and never runs
// user code.
//
// It is kept as one package because its parts share one format: the
// manifest and its content-addressed pages are what a commit writes, a
// merge compares, the cache materialises and the NATS and disk stores
// keep; split, that format and the commit's conflict rules would be
// exported to each.
package workspace
