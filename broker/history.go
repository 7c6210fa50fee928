package broker

// HistoryTx is what a dead letter's history needs from storage: its
// failed attempts, its lineage (the dlq: chain) and what became of it.
type HistoryTx interface{}
