package broker

import "context"

// ExpiryTx is what dead-letter expiry (deadLetterRetentionSeconds) needs from storage. (Being written: issue 16.)
type ExpiryTx interface{}

// maintainDeadLetters runs dead-letter expiry (deadLetterRetentionSeconds). (Being written: issue 16.)
func (b *Broker) maintainDeadLetters(ctx context.Context, r *TaskReport) error { return nil }
