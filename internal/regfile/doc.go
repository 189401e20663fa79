// Package regfile reads the files whose paths an operator configures (the configuration, the
// removal confirmation, the state file, certificates and CA bundles): a regular file only,
// opened without blocking, read whole up to a bound. A FIFO, a device or a directory put at
// such a path is refused with an error naming the path, instead of hanging the reader in open
// or read (a FIFO with no writer blocks open forever; a character device never ends).
//
// Like everything in internal/, it must not import the probe, the collector, the weights or
// the controller (internal/layers checks).
package regfile
