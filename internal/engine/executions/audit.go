package executions

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// auditRecord is one line of the audit trail, appended when an execution
// ends.
type auditRecord struct {
	Time        time.Time `json:"time"`
	Action      string    `json:"action"` // always actionEnd
	ExecutionID string    `json:"execution_id"`
	auditInfo
	PythonVersion   string     `json:"python_version,omitempty"`
	Status          run.Status `json:"status"`
	Reason          string     `json:"reason,omitempty"`
	ExitCode        int        `json:"exit_code"`
	DurationMs      int64      `json:"duration_ms"`
	CPUTimeMs       int64      `json:"cpu_time_ms"`
	PeakMemoryBytes int64      `json:"peak_memory_bytes"`
	// NetworkEvents are the payload's connection attempts and lookups.
	NetworkEvents []run.NetworkEvent `json:"network_events,omitempty"`
}

// actionEnd is the audit trail's action of an execution that ended; the
// engine records the other actions (what callers did).
const actionEnd = "end"

// appendAudit writes the audit record of a final execution. The outcome
// is already stored, so a failure here is logged at error level for the
// operator rather than failing the execution.
func (e *Service) appendAudit(ctx context.Context, r *Record) {
	b, err := json.Marshal(auditRecord{
		Time:            run.Now(),
		Action:          actionEnd,
		ExecutionID:     r.ID,
		auditInfo:       r.Audit,
		PythonVersion:   r.PythonVersion,
		Status:          r.Status,
		Reason:          r.Reason,
		ExitCode:        r.ExitCode,
		DurationMs:      r.DurationMs,
		CPUTimeMs:       r.CPUTimeMs,
		PeakMemoryBytes: r.PeakMemoryBytes,
		NetworkEvents:   r.NetworkEvents,
	})
	if err == nil {
		err = e.st.AppendAudit(ctx, b)
	}
	if err != nil {
		e.log.Error("appending audit record", "execution_id", r.ID, "err", err)
	}
}

// codeHash is the sha256 of a request's files: for each file in order, its
// path length, path, data length and data, so that no two different file
// sets hash alike.
func codeHash(files []run.File) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
