"""The fitting and training commands behind the weights lode ships (not part of the installed
package). Each reads its data and writes its output where its arguments say; `README.md` here
lists every file they write and the product module that reads it."""
