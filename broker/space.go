package broker

import "context"

// SpaceTx is what giving free pages back needs from storage. (Being written: issue 16.)
type SpaceTx interface{}

// maintainSpace runs giving free pages back. (Being written: issue 16.)
func (b *Broker) maintainSpace(ctx context.Context, r *TaskReport) error { return nil }
