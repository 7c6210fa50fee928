package broker

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// The header search box (issue 14): one text, looked up as every kind of
// id a support desk is handed, across every queue and group.

// MaxSearchBoxText is the longest search text, in bytes. Every id is at
// most MaxNameLength; the rest is room for free text.
const MaxSearchBoxText = 512

// MaxShortIDCandidates bounds the messages a short id is looked up as: a
// short id names one message in every 65,536 pushed within its 65.5 s
// (see MessagesByShortID), so this many only when more than 268M
// messages were pushed in those seconds; the newest are looked at then.
const MaxShortIDCandidates = 4096

// What a search matched a hit by (SearchHit.Match).
const (
	MatchMessageID         = "message id"
	MatchShortID           = "short message id"
	MatchTransactionID     = "transactionId"
	MatchTransactionPrefix = "transactionId prefix"
	MatchTraceID           = "traceId"
	MatchText              = "text"
)

// SearchTx is what Search needs from storage, inside one read
// transaction. Messages come without their payloads, dead letters
// without their messages' payloads and with at most the first
// SearchErrorBytes of their error text. Each method only reads (the
// tables it names, and the queues, partitions and groups a dead letter
// joins), locks nothing but its snapshot, and answers "not found" with
// an empty list, never ErrNotFound.
type SearchTx interface {
	// MessageHeads returns the messages with the given seqs that exist,
	// in seq order.
	MessageHeads(ctx context.Context, seqs []int64) ([]Message, error)
	// MessagesByShortID returns, newest first, up to limit messages
	// created in [from, to] (milliseconds) whose seq's low 16 bits are
	// low: the messages a short id (ShortID) may name. The store may count
	// on a message's creation time growing with its seq (mostly: pushes
	// of several processes to different partitions commit beside each
	// other, a clock may be set back); a message pushed so may be missed
	// at the window's edge, never wrongly found (the caller checks the
	// id).
	MessagesByShortID(ctx context.Context, from, to time.Time, low uint16, limit int) ([]Message, error)
	// MessagesByTransaction returns up to limit messages, in any
	// partition, whose transactionId is txid, or starts with it when
	// prefix is set, in no order to count on (one index search a
	// partition: the partitions are read whole).
	MessagesByTransaction(ctx context.Context, txid string, prefix bool, limit int) ([]Message, error)
	// DeadLettersByTransaction returns up to limit dead letters whose
	// message's transactionId is txid, newest failure first, or starts
	// with it when prefix is set, in transactionId order.
	DeadLettersByTransaction(ctx context.Context, txid string, prefix bool, limit int) ([]DeadLetter, error)
	// DeadLettersByTrace returns up to limit dead letters, newest first,
	// whose message's traceId is traceID (not empty).
	DeadLettersByTrace(ctx context.Context, traceID string, limit int) ([]DeadLetter, error)
	// DeadLettersOfSeqs returns up to limit dead letters, in every group,
	// of the messages seqs, by seq then group id.
	DeadLettersOfSeqs(ctx context.Context, seqs []int64, limit int) ([]DeadLetter, error)
	// DeadLettersByShortID is MessagesByShortID over the dead letters
	// (each with its message's seq and push time, which it keeps once
	// retention removed the message): up to limit dead letters whose
	// messages were pushed in [from, to] with a seq whose low 16 bits are
	// low, newest first.
	DeadLettersByShortID(ctx context.Context, from, to time.Time, low uint16, limit int) ([]DeadLetter, error)
	// PartitionConsumers returns the consumers of a partition (one per
	// group that reads its queue), with their groups' names, by name.
	PartitionConsumers(ctx context.Context, partitionID int64) ([]NamedConsumer, error)
	// PayloadIndexedInPart reports whether the store's full-text index of
	// dead letters holds only part of the words of payload (the store
	// bounds what it indexes of one payload, so that indexing never
	// refuses a dead letter). It reads nothing.
	PayloadIndexedInPart(payload []byte) bool
}

// SearchErrorBytes is how much of a dead letter's error text a search
// reads: enough for its first line as a list shows it.
const SearchErrorBytes = 1024

// NamedConsumer is a consumer with its group's name.
type NamedConsumer struct {
	Group string
	Consumer
}

// SearchResult is what Search found for a text.
type SearchResult struct {
	Query string   // the text as searched (trimmed)
	As    []string // what the text was looked up as, in order (Match* values)
	Hits  []SearchHit
	More  bool // there were more than the limit
}

// SearchHit is one match: a dead letter, or a message that is none (Group
// empty, ID 0), with where it is.
type SearchHit struct {
	// DeadLetter is the dead letter (Payload nil, Error at most
	// SearchErrorBytes), or for a message with no dead letter its queue,
	// partition, ids and times.
	DeadLetter
	Match        string // how it was found (Match*)
	IsDeadLetter bool
	// For a message that is no dead letter: where it is in each group
	// that reads its queue, and its replayed copy, if one was pushed.
	Places     []GroupPlace
	ReplayedAs string
}

// Group states of a message that is not a dead letter (GroupPlace.State).
const (
	PlaceSettled  = "settled"  // the group is past it: completed, dropped, or dead-lettered and then replayed or deleted
	PlaceLeased   = "leased"   // delivered, under a live lease
	PlaceRetrying = "retrying" // failed and waiting for its next try
	PlacePending  = "pending"  // not delivered to the group yet (or its lease ran out)
)

// GroupPlace is where a message is for one consumer group.
type GroupPlace struct {
	Group   string
	State   string // Place*
	Retries int    // failed tries so far, for PlaceRetrying and PlaceLeased
}

// shortIDRE is the short form of a message id that the lists show (see
// views.ShortID): its first 8 and last 4 hex digits around an ellipsis,
// as copied ("…") or typed ("..." or "..").
var shortIDRE = regexp.MustCompile(`^([0-9a-fA-F]{8})(?:…|\.{2,3})([0-9a-fA-F]{4})$`)

// Search looks text up, in one read snapshot, as a message id (whole or
// short), a transactionId (exact; when nothing is found, as a prefix) and
// a traceId, across every queue and group, and returns up to limit
// hits: dead letters first (newest failure first), then messages that are
// not dead letters (newest first). A message found by its id or
// transactionId is shown as its dead letters, one per group, when it
// has any. When nothing matches, the text is searched for as words in
// dead letters' payloads and error texts (SearchText, in a snapshot of
// its own; text it cannot search, with no word or too long, matches
// nothing). Text that is empty, longer than MaxSearchBoxText or not
// UTF-8 is ErrInvalid.
func (b *Broker) Search(ctx context.Context, text string, limit int) (SearchResult, error) {
	return b.SearchIn(ctx, text, limit, QueueScope{})
}

// SearchIn is Search within a queue scope: the dead letters and messages
// of other queues are as if absent (not found, not counted in More).
func (b *Broker) SearchIn(ctx context.Context, text string, limit int, scope QueueScope) (SearchResult, error) {
	q := strings.TrimSpace(text)
	switch {
	case !utf8.ValidString(text):
		return SearchResult{}, errorf(ErrInvalid, "the search text is not valid UTF-8")
	case len(text) > MaxSearchBoxText:
		return SearchResult{}, errorf(ErrInvalid, "the search text is %d bytes; at most %d", len(text), MaxSearchBoxText)
	case q == "":
		return SearchResult{}, errorf(ErrInvalid, "the search text is empty")
	case limit < 1 || limit > MaxPageSize:
		return SearchResult{}, errorf(ErrInvalid, "limit must be 1-%d", MaxPageSize)
	}
	res := SearchResult{Query: q}
	err := b.store.View(ctx, func(tx Tx) error {
		s := searcher{tx: tx, now: b.now(), limit: limit + 1, seen: map[int64]bool{}, msgSeen: map[int64]bool{}, scope: scope}
		return s.run(ctx, q, &res)
	})
	if err != nil {
		return SearchResult{}, err
	}
	if len(res.Hits) == 0 {
		res.As = append(res.As, MatchText)
		page, err := b.DeadLetters(ctx, DLQQuery{Text: q, Limit: limit + 1, Scope: scope})
		dls := page.Items
		if err != nil && !errors.Is(err, ErrInvalid) {
			return SearchResult{}, fmt.Errorf("free-text search: %w", err)
		}
		for _, d := range dls {
			d.Payload = nil
			res.Hits = append(res.Hits, SearchHit{DeadLetter: d, Match: MatchText, IsDeadLetter: true})
		}
	}
	if len(res.Hits) > limit {
		res.Hits, res.More = res.Hits[:limit], true
	}
	return res, nil
}

// searcherTx is what a search reads: the dead letters and messages it
// finds (SearchTx, and a message's seq), and their queues and
// partitions.
type searcherTx interface {
	SearchTx
	MessageTx
	PartitionTx
	QueueTx
}

// searcher collects the hits of one search.
type searcher struct {
	tx      searcherTx
	now     time.Time
	limit   int            // hits wanted (one more than asked: "more")
	seen    map[int64]bool // dead letters by row id
	msgSeen map[int64]bool // messages by seq (found, dead letter or not)
	dls     []SearchHit
	msgs    []SearchHit
	scope   QueueScope // the queues whose hits are kept
}

func (s *searcher) run(ctx context.Context, q string, res *SearchResult) error {
	var found []Message // by id or transactionId: shown as their dead letters, or as themselves
	var how []string
	note := func(kind string) { res.As = append(res.As, kind) }
	addMessages := func(ms []Message, kind string) {
		for _, m := range ms {
			if !s.msgSeen[m.Seq] {
				s.msgSeen[m.Seq] = true
				found = append(found, m)
				how = append(how, kind)
			}
		}
	}

	if ms, seq, ok := ParseMessageID(strings.ToLower(q)); ok {
		note(MatchMessageID)
		heads, err := s.tx.MessageHeads(ctx, []int64{seq})
		if err != nil {
			return fmt.Errorf("message by id: %w", err)
		}
		kept := false
		for _, m := range heads {
			if m.CreatedAt.UnixMilli() == ms {
				kept = true
				addMessages([]Message{m}, MatchMessageID)
			}
		}
		if !kept {
			// Retention may have removed the message: its dead letters
			// keep its seq and push time.
			dls, err := s.tx.DeadLettersOfSeqs(ctx, []int64{seq}, s.limit)
			if err != nil {
				return fmt.Errorf("dead letters by message id: %w", err)
			}
			var named []DeadLetter
			for _, d := range dls {
				if d.CreatedAt.UnixMilli() == ms {
					named = append(named, d)
				}
			}
			s.addDeadLetters(named, MatchMessageID)
		}
	}
	if sm := shortIDRE.FindStringSubmatch(q); sm != nil {
		note(MatchShortID)
		ms, dls, err := s.byShortID(ctx, strings.ToLower(sm[1]), strings.ToLower(sm[2]))
		if err != nil {
			return err
		}
		addMessages(ms, MatchShortID)
		s.addDeadLetters(dls, MatchShortID)
	}
	if len(q) <= MaxNameLength {
		note(MatchTransactionID)
		if err := s.byTransaction(ctx, q, false, &found, &how); err != nil {
			return err
		}
		note(MatchTraceID)
		dls, err := s.tx.DeadLettersByTrace(ctx, q, s.limit)
		if err != nil {
			return fmt.Errorf("dead letters by traceId: %w", err)
		}
		s.addDeadLetters(dls, MatchTraceID)
	}
	if err := s.resolve(ctx, found, how); err != nil {
		return err
	}
	if len(s.dls)+len(s.msgs) == 0 && len(q) <= MaxNameLength {
		note(MatchTransactionPrefix)
		found, how = nil, nil
		if err := s.byTransaction(ctx, q, true, &found, &how); err != nil {
			return err
		}
		if err := s.resolve(ctx, found, how); err != nil {
			return err
		}
	}
	sort.SliceStable(s.dls, func(i, j int) bool {
		a, b := s.dls[i], s.dls[j]
		if !a.FailedAt.Equal(b.FailedAt) {
			return a.FailedAt.After(b.FailedAt)
		}
		return a.ID > b.ID
	})
	sort.SliceStable(s.msgs, func(i, j int) bool { return s.msgs[i].Seq > s.msgs[j].Seq })
	res.Hits = append(s.dls, s.msgs...)
	return nil
}

// byShortID returns the messages whose id starts with the 8 hex digits
// prefix and ends with the 4 hex digits suffix, and the dead letters of
// such messages (found by their own seqs and push times: retention may
// have removed the message). The prefix is the top 32 of the id's 48
// bits of milliseconds (a window of 65.5 s), the suffix the low 16 bits
// of the seq.
func (s *searcher) byShortID(ctx context.Context, prefix, suffix string) ([]Message, []DeadLetter, error) {
	var top, low uint64
	fmt.Sscanf(prefix, "%x", &top) // 8 hex digits: cannot fail
	fmt.Sscanf(suffix, "%x", &low)
	from := time.UnixMilli(int64(top << 16)).UTC()
	to := time.UnixMilli(int64(top<<16 | 0xFFFF)).UTC()
	named := func(id string) bool { return id[:8] == prefix && id[len(id)-4:] == suffix }
	ms, err := s.tx.MessagesByShortID(ctx, from, to, uint16(low), MaxShortIDCandidates)
	if err != nil {
		return nil, nil, fmt.Errorf("messages by short id: %w", err)
	}
	var out []Message
	for _, m := range ms {
		if named(m.ID()) {
			out = append(out, m)
		}
	}
	dls, err := s.tx.DeadLettersByShortID(ctx, from, to, uint16(low), MaxShortIDCandidates)
	if err != nil {
		return nil, nil, fmt.Errorf("dead letters by short id: %w", err)
	}
	var dout []DeadLetter
	for _, d := range dls {
		if named(d.MessageID()) {
			dout = append(dout, d)
		}
	}
	return out, dout, nil
}

// byTransaction finds the dead letters and the messages with the
// transactionId (or its prefix).
func (s *searcher) byTransaction(ctx context.Context, q string, prefix bool, found *[]Message, how *[]string) error {
	kind := MatchTransactionID
	if prefix {
		kind = MatchTransactionPrefix
	}
	dls, err := s.tx.DeadLettersByTransaction(ctx, q, prefix, s.limit)
	if err != nil {
		return fmt.Errorf("dead letters by transactionId: %w", err)
	}
	s.addDeadLetters(dls, kind)
	ms, err := s.tx.MessagesByTransaction(ctx, q, prefix, s.limit)
	if err != nil {
		return fmt.Errorf("messages by transactionId: %w", err)
	}
	for _, m := range ms {
		if !s.msgSeen[m.Seq] {
			s.msgSeen[m.Seq] = true
			*found = append(*found, m)
			*how = append(*how, kind)
		}
	}
	return nil
}

func (s *searcher) addDeadLetters(dls []DeadLetter, kind string) {
	for _, d := range dls {
		if !s.seen[d.ID] && s.scope.Allows(d.Queue) {
			s.seen[d.ID] = true
			s.msgSeen[d.Seq] = true
			s.dls = append(s.dls, SearchHit{DeadLetter: d, Match: kind, IsDeadLetter: true})
		}
	}
}

// resolve turns the messages found into hits: their dead letters, or
// themselves with where they are.
func (s *searcher) resolve(ctx context.Context, found []Message, how []string) error {
	if len(found) == 0 {
		return nil
	}
	seqs := make([]int64, len(found))
	for i, m := range found {
		seqs[i] = m.Seq
	}
	dls, err := s.tx.DeadLettersOfSeqs(ctx, seqs, s.limit)
	if err != nil {
		return fmt.Errorf("dead letters of messages: %w", err)
	}
	hasDL := map[int64]bool{}
	kindOf := map[int64]string{}
	for i, m := range found {
		kindOf[m.Seq] = how[i]
	}
	for _, d := range dls {
		hasDL[d.Seq] = true
		if !s.seen[d.ID] && s.scope.Allows(d.Queue) {
			s.seen[d.ID] = true
			s.dls = append(s.dls, SearchHit{DeadLetter: d, Match: kindOf[d.Seq], IsDeadLetter: true})
		}
	}
	for i, m := range found {
		if hasDL[m.Seq] || len(s.msgs) >= s.limit {
			continue
		}
		h, err := s.place(ctx, m, how[i])
		if err != nil {
			return err
		}
		if !s.scope.Allows(h.Queue) {
			continue
		}
		s.msgs = append(s.msgs, h)
	}
	return nil
}

// place says where a message that is not a dead letter is: its queue and
// partition, each group's state, and its replayed copy, if any.
func (s *searcher) place(ctx context.Context, m Message, kind string) (SearchHit, error) {
	p, err := s.tx.PartitionByID(ctx, m.PartitionID)
	if err != nil {
		return SearchHit{}, fmt.Errorf("partition of message: %w", err)
	}
	q, err := s.tx.QueueByID(ctx, p.QueueID)
	if err != nil {
		return SearchHit{}, fmt.Errorf("queue of message: %w", err)
	}
	h := SearchHit{Match: kind, DeadLetter: DeadLetter{
		Seq: m.Seq, QueueID: q.ID, Queue: q.Name, PartitionID: p.ID, Partition: p.Name, PartitionKey: p.UUID,
		TransactionID: m.TransactionID, TraceID: m.TraceID, CreatedAt: m.CreatedAt,
	}}
	cs, err := s.tx.PartitionConsumers(ctx, p.ID)
	if err != nil {
		return SearchHit{}, fmt.Errorf("consumers of partition: %w", err)
	}
	for _, c := range cs {
		h.Places = append(h.Places, placeOf(c, m.Seq, s.now))
	}
	copySeq, err := s.tx.MessageSeq(ctx, p.ID, ReplayPrefix+m.ID())
	if err != nil && !errors.Is(err, ErrNotFound) {
		return SearchHit{}, fmt.Errorf("replayed copy: %w", err)
	}
	if err == nil {
		heads, err := s.tx.MessageHeads(ctx, []int64{copySeq})
		if err != nil {
			return SearchHit{}, fmt.Errorf("replayed copy: %w", err)
		}
		if len(heads) == 1 {
			h.ReplayedAs = heads[0].ID()
		}
	}
	return h, nil
}

// placeOf is where message seq is for a group, from its consumer.
func placeOf(c NamedConsumer, seq int64, now time.Time) GroupPlace {
	g := GroupPlace{Group: c.Group, Retries: c.retriesOf(seq)}
	switch {
	case c.Cursor >= seq:
		g.State, g.Retries = PlaceSettled, 0
	case c.leaseLive(now) && seq <= c.LeaseLast:
		g.State = PlaceLeased
	case g.Retries > 0:
		g.State = PlaceRetrying
	default:
		g.State = PlacePending
	}
	return g
}
