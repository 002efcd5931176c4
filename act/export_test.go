package act

// RowsOf exposes rowsOf to the fuzz tests, which predict from it which
// layouts an op accepts.
var RowsOf = rowsOf

// NumKinds is the number of activation kinds: Kind(NumKinds) is the first
// unknown one.
const NumKinds = numKinds
