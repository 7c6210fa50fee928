package sqlcore

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The import of an archive's dead letters (broker/archive.go).

const (
	// ImportDupTxSQL: has group ?2 a dead letter of transactionId ?3 in
	// partition ?1 already? (dead_letters_transaction.)
	ImportDupTxSQL = `SELECT ?3 <> '' AND EXISTS (SELECT 1 FROM dead_letters WHERE transaction_id = ?3 AND partition_id = ?1 AND group_id = ?2)`
	// ImportSameSQL: is seq ?1 this database's message of partition ?2
	// and transactionId ?3 (kept, pushed at ?4; or named by a removed dead
	// letter's record)? And has group ?5 its dead letter already? (The
	// primary key; removed_dead_letters_seq; the unique index of
	// dead_letters (seq, group_id).)
	ImportSameSQL = `SELECT EXISTS (SELECT 1 FROM messages WHERE seq = ?1 AND partition_id = ?2 AND transaction_id = ?3 AND created_at = ?4)
		OR EXISTS (SELECT 1 FROM removed_dead_letters WHERE seq = ?1 AND partition_id = ?2 AND transaction_id = ?3),
		EXISTS (SELECT 1 FROM dead_letters WHERE seq = ?1 AND group_id = ?5)`
)

// SeqForImport implements broker.ArchiveTx: see its doc. A new seq is
// one above the highest of messages (the retention's placeholder row
// included), and the placeholder moves one above it (keepSeqFloor), so
// that no push draws it and no join of the dead letter finds a message.
// On PostgreSQL it is drawn from messages' identity sequence, which
// no push draws again and no message has had (the highest of messages
// may be below seqs deleted messages had, which dead letters, replays and
// attempts still name; there is no placeholder to say so).
func (t *Tx) SeqForImport(ctx context.Context, i broker.ImportSeq) (int64, bool, error) {
	seq, partitionID, groupID, txid, createdAt, now := i.Seq, i.PartitionID, i.GroupID, i.TransactionID, i.CreatedAt, i.Now
	var dup, same bool
	if err := t.QueryRow(ctx, ImportDupTxSQL, partitionID, groupID, txid).Scan(&dup); err != nil || dup {
		return 0, dup, err
	}
	if seq > 0 {
		// The seq is only this message's when a row says so: in another
		// database it may be any message's.
		if err := t.QueryRow(ctx, ImportSameSQL, seq, partitionID, txid, MS(createdAt), groupID).Scan(&same, &dup); err != nil {
			return 0, false, err
		}
		if same {
			return seq, dup, nil
		}
	}
	seq, err := t.d.ImportSeq(ctx, t, now)
	return seq, false, err
}
