package broker

// Transactions narrowed to the concerns a function needs: each embeds
// the per-concern interfaces of Tx it names.

// auditExpirySubscriptionTx is a transaction for AuditTx, ExpiryTx, SubscriptionTx.
type auditExpirySubscriptionTx interface {
	AuditTx
	ExpiryTx
	SubscriptionTx
}

// auditJobReplayTx is a transaction for AuditTx, JobTx, ReplayTx,
// ErrorGroupStateTx.
type auditJobReplayTx interface {
	AuditTx
	JobTx
	ReplayTx
	ErrorGroupStateTx
}

// errorGroupAuditTx is a transaction for ErrorGroupStateTx, AuditTx.
type errorGroupAuditTx interface {
	ErrorGroupStateTx
	AuditTx
}

// consumerPartitionSubscriptionTx is a transaction for ConsumerTx, PartitionTx, SubscriptionTx.
type consumerPartitionSubscriptionTx interface {
	ConsumerTx
	PartitionTx
	SubscriptionTx
}

// consumerWindowTx is a transaction for ConsumerTx, WindowTx.
type consumerWindowTx interface {
	ConsumerTx
	WindowTx
}

// deadLetterGroupStatsTx is a transaction for DeadLetterTx, GroupTx, StatsTx.
type deadLetterGroupStatsTx interface {
	DeadLetterTx
	GroupTx
	StatsTx
}

// deadLetterHistoryTx is a transaction for DeadLetterTx, HistoryTx.
type deadLetterHistoryTx interface {
	DeadLetterTx
	HistoryTx
}

// deadLetterQueueSubscriptionTx is a transaction for DeadLetterTx, QueueTx, SubscriptionTx.
type deadLetterQueueSubscriptionTx interface {
	DeadLetterTx
	QueueTx
	SubscriptionTx
}

// deadLetterSubscriptionTx is a transaction for DeadLetterTx, SubscriptionTx.
type deadLetterSubscriptionTx interface {
	DeadLetterTx
	SubscriptionTx
}

// messagePartitionQueueTx is a transaction for MessageTx, PartitionTx, QueueTx.
type messagePartitionQueueTx interface {
	MessageTx
	PartitionTx
	QueueTx
}

// partitionQueueSubscriptionTx is a transaction for PartitionTx, QueueTx, SubscriptionTx.
type partitionQueueSubscriptionTx interface {
	PartitionTx
	QueueTx
	SubscriptionTx
}

// partitionQueueTx is a transaction for PartitionTx, QueueTx.
type partitionQueueTx interface {
	PartitionTx
	QueueTx
}

// partitionStatsSubscriptionTx is a transaction for PartitionTx, StatsTx, SubscriptionTx.
type partitionStatsSubscriptionTx interface {
	PartitionTx
	StatsTx
	SubscriptionTx
}

// queueReplayCapTx is a transaction for QueueTx, ReplayCapTx.
type queueReplayCapTx interface {
	QueueTx
	ReplayCapTx
}

// queueStatsSubscriptionTx is a transaction for QueueTx, StatsTx, SubscriptionTx.
type queueStatsSubscriptionTx interface {
	QueueTx
	StatsTx
	SubscriptionTx
}

// statsSubscriptionTx is a transaction for StatsTx, SubscriptionTx.
type statsSubscriptionTx interface {
	StatsTx
	SubscriptionTx
}

// messagePassTx is a transaction for MessageTx, PassTx: the passer's.
type messagePassTx interface {
	MessageTx
	PassTx
}
