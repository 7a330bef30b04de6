package mcpadapter

// Update is the package's -update flag, for the golden conversations of the
// external test package (golden_test.go), which replay over the HTTP front
// and so cannot be internal tests: package httpfront imports this one.
var Update = update
