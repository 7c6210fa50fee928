package broker

import "errors"

// ErrNoSpace is a store that cannot write for want of space: its disk is
// full (or a quota, or a file size limit, is reached). Nothing was
// changed, what was committed before is kept, and the same request
// succeeds once space is freed: the store recovers by itself.
var ErrNoSpace = errors.New("no space left")
