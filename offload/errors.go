package offload

import (
	"errors"
	"syscall"
)

// ErrorKind classifies a failure of one entry or one batch.
type ErrorKind uint8

const (
	KindOther       ErrorKind = iota
	KindUnsupported           // the device cannot hold this match or action (EOPNOTSUPP)
	KindNoSpace               // the table or a flow group is full (ENOSPC)
	KindDeviceGone            // the device disappeared (ENODEV)
	KindExists                // an identical entry is already installed (EEXIST)
	KindNotFound              // the entry to remove is not installed (ENOENT)
)

// Sentinel errors, one per kind: errors.Is(err, ErrNoSpace) holds for every
// *EntryError of kind KindNoSpace.
var (
	ErrUnsupported = errors.New("unsupported by the device")
	ErrNoSpace     = errors.New("hardware table full")
	ErrDeviceGone  = errors.New("device gone")
	ErrExists      = errors.New("entry exists")
	ErrNotFound    = errors.New("entry not found")
)

var kindErr = [...]error{KindUnsupported: ErrUnsupported, KindNoSpace: ErrNoSpace,
	KindDeviceGone: ErrDeviceGone, KindExists: ErrExists, KindNotFound: ErrNotFound}

var kindErrno = [...]syscall.Errno{KindUnsupported: syscall.EOPNOTSUPP, KindNoSpace: syscall.ENOSPC,
	KindDeviceGone: syscall.ENODEV, KindExists: syscall.EEXIST, KindNotFound: syscall.ENOENT}

func (k ErrorKind) String() string {
	if int(k) < len(kindErr) && kindErr[k] != nil {
		return kindErr[k].Error()
	}
	return "error"
}

// EntryError is the failure of one operation on one entry (or, with Entry
// empty, on a whole batch). It keeps the errno and the device's extended-ack
// text. errors.Is works with the sentinel of its kind and with its errno.
type EntryError struct {
	Op     string // "install", "remove", "dump", "stats"
	Dev    string // device, or "sim"
	Entry  string // the entry: cookie and match
	Kind   ErrorKind
	Errno  syscall.Errno
	Extack string
	// Missing are the keys the device lacks (KindUnsupported), if known.
	Missing Keys
	Err     error // underlying error (a backend's own typed error), if any
}

func (e *EntryError) Error() string {
	s := e.Op
	if e.Dev != "" {
		s += " dev " + e.Dev
	}
	if e.Entry != "" {
		s += " entry " + e.Entry
	}
	s += ": " + e.Kind.String()
	if e.Errno != 0 {
		s += " (" + e.Errno.Error() + ")"
	}
	if e.Extack != "" {
		s += ": " + e.Extack
	}
	if e.Err != nil && e.Extack == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches the sentinel of the error's kind.
func (e *EntryError) Is(target error) bool {
	return int(e.Kind) < len(kindErr) && kindErr[e.Kind] != nil && target == kindErr[e.Kind]
}

// Unwrap returns the underlying error and the errno.
func (e *EntryError) Unwrap() []error {
	var out []error
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.Errno != 0 {
		out = append(out, e.Errno)
	}
	return out
}

// NewError returns an *EntryError of kind k with the kind's usual errno.
func NewError(op, dev, entry string, k ErrorKind, extack string) *EntryError {
	e := &EntryError{Op: op, Dev: dev, Entry: entry, Kind: k, Extack: extack}
	if int(k) < len(kindErrno) {
		e.Errno = kindErrno[k]
	}
	return e
}

func unsupported(miss Keys, msg string) *EntryError {
	return &EntryError{Kind: KindUnsupported, Errno: syscall.EOPNOTSUPP, Extack: msg, Missing: miss}
}

func is(err error, k ErrorKind) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, kindErr[k]) {
		return true
	}
	var en syscall.Errno
	return errors.As(err, &en) && en == kindErrno[k]
}

// IsUnsupported reports a device refusal of the match or action
// (EOPNOTSUPP or ErrUnsupported).
func IsUnsupported(err error) bool { return is(err, KindUnsupported) }

// IsNoSpace reports a full table or flow group (ENOSPC or ErrNoSpace).
func IsNoSpace(err error) bool { return is(err, KindNoSpace) }

// IsDeviceGone reports that the device vanished (ENODEV or ErrDeviceGone).
func IsDeviceGone(err error) bool { return is(err, KindDeviceGone) }

// IsExists reports an identical entry already installed.
func IsExists(err error) bool { return is(err, KindExists) }

// IsNotFound reports an entry that is not installed.
func IsNotFound(err error) bool { return is(err, KindNotFound) }
