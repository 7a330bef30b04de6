// Package watch keeps a bounded set of open watchers (the listen streams of
// subscriptions/listen, the live view's event streams) and one goroutine
// that re-reads what they watch.
//
// # Invariants
//
//   - A Set never holds more than its bound: Add beyond it is refused and
//     changes nothing.
//   - While any member is open, one goroutine (never more) calls scan with
//     every member, after each commit the store reports and at least every
//     poll. It arms the store's change signal before it reads, so a commit
//     made during a scan is never missed; a new member is scanned at once.
//   - The goroutine stops when the last member is removed, and a later Add
//     starts it again: an idle Set costs nothing.
//   - scan runs outside the Set's lock, on a copy of the members: it may
//     call Remove (a member that ended) without deadlock.
package watch
