package eureka

// AppendXMLText appends s escaped as XML character data, the way the
// encoders write text, for documents built outside this package.
func AppendXMLText(dst []byte, s string) []byte { return appendXMLText(dst, s) }
