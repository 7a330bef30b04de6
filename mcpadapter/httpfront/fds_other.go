//go:build !unix

package httpfront

// openFilesLimit reports that the limit on open files is unknown here.
func openFilesLimit() (uint64, bool) { return 0, false }
