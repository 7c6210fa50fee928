package broker

// What the dashboard's live pages follow (web's server-sent events): the
// news that wakes waiting pops, read without a pop.

// AnyNews is the key notified with every news of any queue (and of the
// jobs): for a page that shows every queue at once.
const AnyNews = "\x00any"

// Watch returns a channel closed at the next news of key: a queue's name
// (a push, an ack, a dead letter filed, replayed, deleted or restored),
// or AnyNews. Watch before looking, as pops do, so that no news
// between the look and the wait is missed. On PostgreSQL the news of the
// other processes comes too; it can be lost there (a broken connection
// wakes every watcher instead), so a watcher that must not miss any looks
// again now and then.
func (b *Broker) Watch(key string) <-chan struct{} { return b.news.Watch(key) }

// Closed returns a channel closed once Close was called: what waits for
// news stops waiting then (the server is stopping).
func (b *Broker) Closed() <-chan struct{} { return b.closed }
