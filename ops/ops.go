// Package ops links every kernel family into a program: importing it for
// its side effects registers every op, so the kittens command, the tests and
// the generated tables see them all.
//
//	import _ "github.com/gokittens/kittens/ops"
package ops

import (
	_ "github.com/gokittens/kittens/act"
	_ "github.com/gokittens/kittens/conv1d"
	_ "github.com/gokittens/kittens/norm"
	_ "github.com/gokittens/kittens/rope"
	_ "github.com/gokittens/kittens/softmax"
	_ "github.com/gokittens/kittens/topk"
)
