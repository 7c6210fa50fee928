package views

import "time"

// SearchPage is the header search's page: what a text found.
type SearchPage struct {
	Page
	Query  string // "" when nothing was asked yet
	Rows   []SearchRow
	More   bool // more than Limit matched
	Limit  int
	Tried  string // what the text was looked up as, in words
	Hints  bool   // show what can be searched
	Single *MessagePlace
}

// SearchRow is one match in the list.
type SearchRow struct {
	ID           string // the message id
	URL          string // the dead letter's page, or the search of the message's id
	Queue        string
	QueueURL     string
	Partition    string
	Group        string // "" for a message that is no dead letter
	TxID         string
	Error        string // first line
	FailedAt     time.Time
	PushedAt     time.Time
	IsDeadLetter bool
	Match        string
	State        string // for a message that is no dead letter: where it is, in short
}

// MessagePlace is a message that is not a dead letter: where it is.
type MessagePlace struct {
	ID             string
	Match          string
	Queue          string
	QueueURL       string
	DeadLettersURL string
	Partition      string
	PartitionID    string
	TxID           string
	TraceID        string
	PushedAt       time.Time
	Places         []PlaceRow
	ReplayedAs     string // the id of its replayed copy
	ReplayedAsURL  string
	OriginalID     string // for a replayed copy: the original's id
	OriginalURL    string
}

// PlaceRow is where a message is for one consumer group.
type PlaceRow struct {
	Group string
	State string // settled, leased, retrying, pending
	Note  string
}
