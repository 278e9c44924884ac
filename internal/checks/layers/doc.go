// Package layers keeps heureka's imports pointing one way (docs/design.md,
// "Packages") and its package comments true about them:
//
//   - Allowed lists, for every package, the heureka packages its non-test
//     code may import; Check reports each package missing from the list
//     and each import the list does not allow (TestImportsPointOneWay).
//   - A package comment says what the package imports in one sentence
//     that begins "It imports", followed by the module-relative paths of
//     the heureka packages it imports, separated by commas and "and",
//     each optionally followed by a note in parentheses, and ended by
//     "only", "of heureka", "and must", a semicolon or a full stop; or by
//     "no heureka package" when it imports none. Listed reads that sentence, and
//     TestDocsListImports checks that the list is the package's imports,
//     for every package that has one. The packages on the main paths
//     (tree.Main) must have one.
//
// It imports no heureka package; its tests import internal/checks/tree.
package layers
