// Package sqlcore makes a Frag of a text that is not a constant, which
// gensql refuses.
package sqlcore

type Frag string

func made(name string) Frag { return Frag(`SELECT ` + name) }
