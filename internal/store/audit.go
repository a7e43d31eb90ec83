package store

import (
	"context"
	"fmt"
)

// AppendAudit appends one record to the audit stream and waits until it is
// stored.
func (s *NATS) AppendAudit(ctx context.Context, data []byte) error {
	if _, err := s.js.Publish(ctx, AuditSubject, data); err != nil {
		return fmt.Errorf("store: appending audit record: %w", mapErr(err))
	}
	return nil
}
