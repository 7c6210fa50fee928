package broker

import "sync"

// Notifier carries the news that wakes waiting pops (and job runners)
// from the writes that make it: a push, an ack that settles or frees a
// partition, a replay, a job's change. The broker calls Notify once the
// write has committed (never inside Update: a rolled-back write wakes
// nobody), and Watch before it looks, so that no news between the look
// and the wait is missed.
//
// LocalNotifier serves one process, as a store of one process needs: a
// store shared by several processes needs one that carries the news
// between them as well, and a waiter must still
// look again on a timer, since news can be lost there.
type Notifier interface {
	// Watch returns a channel closed at the next Notify of key (a queue
	// name, or jobNews).
	Watch(key string) <-chan struct{}
	// Notify wakes every watcher of each key.
	Notify(keys ...string)
}

// LocalNotifier is the Notifier of one process: a channel a key, closed
// and forgotten at its news. The zero value is ready to use.
type LocalNotifier struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

// Watch returns a channel closed at the next Notify of key.
func (n *LocalNotifier) Watch(key string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters == nil {
		n.waiters = map[string]chan struct{}{}
	}
	ch, ok := n.waiters[key]
	if !ok {
		ch = make(chan struct{})
		n.waiters[key] = ch
	}
	return ch
}

// Notify closes the channels of keys that someone watches.
func (n *LocalNotifier) Notify(keys ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		if ch, ok := n.waiters[k]; ok {
			close(ch)
			delete(n.waiters, k)
		}
	}
}

// NotifyAll wakes every watcher of every key: for a Notifier whose news
// from elsewhere may have been lost (a connection that carried it broke),
// so that every waiter looks again.
func (n *LocalNotifier) NotifyAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, ch := range n.waiters {
		close(ch)
		delete(n.waiters, k)
	}
}
