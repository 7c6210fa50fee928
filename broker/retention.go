package broker

import "context"

// RetentionTx is what message retention (completedRetentionSeconds, retentionSeconds) needs from storage. (Being written: issue 16.)
type RetentionTx interface{}

// maintainMessages runs message retention (completedRetentionSeconds, retentionSeconds). (Being written: issue 16.)
func (b *Broker) maintainMessages(ctx context.Context, r *TaskReport) error { return nil }
