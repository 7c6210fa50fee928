package web

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// restoreFor says how long a delete can be undone, as the delete's
// question and its flash say it: "24 hours".
func (s *Server) restoreFor() string {
	d := s.broker.RestoreWindow()
	if d%time.Hour == 0 && d <= 72*time.Hour {
		if d == time.Hour {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return broker.DurationWords(d)
}

// completedGroups names the groups that completed the dead letter's
// message already (broker.MessageState.CompletedBy); none when the
// message is not found.
func (s *Server) completedGroups(ctx context.Context, d broker.DeadLetter) ([]string, error) {
	st, err := s.broker.MessageState(ctx, d.PartitionKey, d.TransactionID)
	if errors.Is(err, broker.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return st.CompletedBy(), nil
}

// lazarusPageHeader marks an error status that is a page of Lazarus's
// to show (the 404 of a dead letter that is gone), not an error: app.js
// swaps it in as it swaps a page, where it would keep a proxy's error
// page out of ours.
const lazarusPageHeader = "Lazarus-Page"
