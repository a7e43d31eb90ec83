package store

import (
	"context"
	"fmt"
)

// PutRequest stores a request payload under the execution id. The object
// store chunks it, so its size is not bound by the server's max_payload.
func (s *NATS) PutRequest(ctx context.Context, id string, data []byte) error {
	if _, err := s.requests.PutBytes(ctx, id, data); err != nil {
		return fmt.Errorf("store: storing request %s: %w", id, mapErr(err))
	}
	return nil
}

// GetRequest returns the payload stored by PutRequest.
func (s *NATS) GetRequest(ctx context.Context, id string) ([]byte, error) {
	b, err := s.requests.GetBytes(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("store: reading request %s: %w", id, mapErr(err))
	}
	return b, nil
}

// DeleteRequest removes a payload once its execution no longer needs it.
func (s *NATS) DeleteRequest(ctx context.Context, id string) error {
	if err := s.requests.Delete(ctx, id); err != nil {
		return fmt.Errorf("store: deleting request %s: %w", id, mapErr(err))
	}
	return nil
}
