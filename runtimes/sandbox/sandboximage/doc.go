// Package sandboximage gives the sandbox runtime its images from package
// image's Store: New adapts a Store (for Options.Images), and importing
// the package lets a runtime open the default store itself
// (sandbox.OpenImages), as runtimes/all does.
package sandboximage
