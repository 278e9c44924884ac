// good: docs/api.md, "Delta" and docs/design.md, "The path of a write"
// bad heading: docs/api.md, "Renew"
// code block is not a heading: docs/api.md, "not a heading"
// missing file: docs/nope.md
// outside: spec/eureka{-}rest.md and the spec §4.4
// outside: DESIGN.md ("AP and CP")
// outside: .{.}/shared/notes
// outside: as issue 8 asks
package tree
