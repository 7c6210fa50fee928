package broker

// PassTx is what a pop needs to pass by the copies replayed to another
// consumer group (ReplayOwnGroup).
type PassTx interface{}
