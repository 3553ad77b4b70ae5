package devcheck

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// EswitchMode is the devlink eswitch mode.
type EswitchMode uint16

// Modes (DEVLINK_ESWITCH_MODE_*).
const (
	Legacy    EswitchMode = unix.DEVLINK_ESWITCH_MODE_LEGACY
	Switchdev EswitchMode = unix.DEVLINK_ESWITCH_MODE_SWITCHDEV
)

func (m EswitchMode) String() string {
	switch m {
	case Legacy:
		return "legacy"
	case Switchdev:
		return "switchdev"
	}
	return fmt.Sprintf("mode(%d)", uint16(m))
}

// Device names a devlink instance, e.g. {"pci", "0000:03:00.0"} or
// {"netdevsim", "netdevsim10"}.
type Device struct{ Bus, Name string }

func (d Device) String() string { return d.Bus + "/" + d.Name }

// Devlink talks to the "devlink" generic netlink family.
type Devlink struct {
	c      *genetlink.Conn
	family genetlink.Family
}

// DialDevlink opens a generic netlink socket (extended ACK on) and resolves
// the devlink family.
func DialDevlink() (*Devlink, error) {
	c, err := genetlink.Dial(&netlink.Config{Strict: true})
	if err != nil {
		return nil, nlerr.Wrap("devlink dial", "", "", err)
	}
	d, err := NewDevlink(c)
	if err != nil {
		c.Close()
	}
	return d, err
}

// NewDevlink uses an existing connection (tests pass genltest fakes).
func NewDevlink(c *genetlink.Conn) (*Devlink, error) {
	f, err := c.GetFamily(unix.DEVLINK_GENL_NAME)
	if err != nil {
		return nil, nlerr.Wrap("devlink family", "", "", err)
	}
	return &Devlink{c: c, family: f}, nil
}

// Close closes the socket.
func (d *Devlink) Close() error { return d.c.Close() }

func (d *Devlink) exec(cmd uint8, flags netlink.HeaderFlags, ae *netlink.AttributeEncoder) ([]genetlink.Message, error) {
	b, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return d.c.Execute(genetlink.Message{Header: genetlink.Header{Command: cmd, Version: d.family.Version}, Data: b}, d.family.ID, flags)
}

func devAttrs(dev Device) *netlink.AttributeEncoder {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.DEVLINK_ATTR_BUS_NAME, dev.Bus)
	ae.String(unix.DEVLINK_ATTR_DEV_NAME, dev.Name)
	return ae
}

// Devices lists the devlink instances.
func (d *Devlink) Devices() ([]Device, error) {
	msgs, err := d.exec(unix.DEVLINK_CMD_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, nlerr.Wrap("devlink dev show", "", "", err)
	}
	var out []Device
	for _, m := range msgs {
		dev, err := parseDev(m.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, dev)
	}
	return out, nil
}

func parseDev(b []byte) (Device, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return Device{}, err
	}
	var dev Device
	for ad.Next() {
		switch ad.Type() {
		case unix.DEVLINK_ATTR_BUS_NAME:
			dev.Bus = ad.String()
		case unix.DEVLINK_ATTR_DEV_NAME:
			dev.Name = ad.String()
		}
	}
	return dev, ad.Err()
}

// EswitchMode reads the eswitch mode (devlink dev eswitch show).
func (d *Devlink) EswitchMode(dev Device) (EswitchMode, error) {
	msgs, err := d.exec(unix.DEVLINK_CMD_ESWITCH_GET, netlink.Request, devAttrs(dev))
	if err != nil {
		return 0, nlerr.Wrap("devlink eswitch show", dev.String(), "", err)
	}
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.DEVLINK_ATTR_ESWITCH_MODE {
				return EswitchMode(ad.Uint16()), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, err
		}
	}
	return 0, nlerr.Wrap("devlink eswitch show", dev.String(), "", errors.New("reply has no DEVLINK_ATTR_ESWITCH_MODE"))
}

// SetEswitchMode changes the eswitch mode (devlink dev eswitch set ... mode).
// On mlx5 set flow_steering_mode before switching to switchdev.
func (d *Devlink) SetEswitchMode(dev Device, m EswitchMode) error {
	ae := devAttrs(dev)
	ae.Uint16(unix.DEVLINK_ATTR_ESWITCH_MODE, uint16(m))
	_, err := d.exec(unix.DEVLINK_CMD_ESWITCH_SET, netlink.Request|netlink.Acknowledge, ae)
	return nlerr.Wrap("devlink eswitch set mode "+m.String(), dev.String(), "", err)
}

// Port is a devlink port with its netdev.
type Port struct {
	Device  Device
	Index   uint32
	Netdev  string
	Ifindex uint32
}

// Ports lists the devlink ports of every device.
func (d *Devlink) Ports() ([]Port, error) {
	msgs, err := d.exec(unix.DEVLINK_CMD_PORT_GET, netlink.Request|netlink.Dump, netlink.NewAttributeEncoder())
	if err != nil {
		return nil, nlerr.Wrap("devlink port show", "", "", err)
	}
	var out []Port
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return nil, err
		}
		var p Port
		for ad.Next() {
			switch ad.Type() {
			case unix.DEVLINK_ATTR_BUS_NAME:
				p.Device.Bus = ad.String()
			case unix.DEVLINK_ATTR_DEV_NAME:
				p.Device.Name = ad.String()
			case unix.DEVLINK_ATTR_PORT_INDEX:
				p.Index = ad.Uint32()
			case unix.DEVLINK_ATTR_PORT_NETDEV_NAME:
				p.Netdev = ad.String()
			case unix.DEVLINK_ATTR_PORT_NETDEV_IFINDEX:
				p.Ifindex = ad.Uint32()
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// DeviceOf returns the devlink device that owns netdev ifname (through its
// devlink port), e.g. the PCI function behind an uplink representor.
func (d *Devlink) DeviceOf(ifname string) (Device, error) {
	ports, err := d.Ports()
	if err != nil {
		return Device{}, err
	}
	for _, p := range ports {
		if p.Netdev == ifname {
			return p.Device, nil
		}
	}
	return Device{}, nlerr.Wrap("devlink port lookup", ifname, "", unix.ENODEV)
}

// ParamCmode is a devlink parameter configuration mode.
type ParamCmode uint8

// Cmodes (DEVLINK_PARAM_CMODE_*).
const (
	CmodeRuntime    ParamCmode = unix.DEVLINK_PARAM_CMODE_RUNTIME
	CmodeDriverinit ParamCmode = unix.DEVLINK_PARAM_CMODE_DRIVERINIT
	CmodePermanent  ParamCmode = unix.DEVLINK_PARAM_CMODE_PERMANENT
)

// Param is one devlink device parameter with its value per cmode. Values
// are uint8, uint16, uint32, string or bool after the parameter's type.
type Param struct {
	Name    string
	Generic bool
	Type    uint8 // NLA type: 1 u8, 2 u16, 3 u32, 5 string, 6 flag (bool)
	Values  map[ParamCmode]any
}

// Parameter types (the NLA_* numbers devlink reports in
// DEVLINK_ATTR_PARAM_TYPE).
const (
	ParamTypeU8     = 1
	ParamTypeU16    = 2
	ParamTypeU32    = 3
	ParamTypeString = 5
	ParamTypeBool   = 6
)

// ErrParamNotFound is returned by Param when the device has no such parameter.
var ErrParamNotFound = errors.New("devcheck: devlink parameter not found")

// Params dumps all parameters of dev (devlink dev param show).
func (d *Devlink) Params(dev Device) ([]Param, error) {
	msgs, err := d.exec(unix.DEVLINK_CMD_PARAM_GET, netlink.Request|netlink.Dump, devAttrs(dev))
	if err != nil {
		return nil, nlerr.Wrap("devlink dev param show", dev.String(), "", err)
	}
	var out []Param
	for _, m := range msgs {
		got, p, err := parseParam(m.Data)
		if err != nil {
			return nil, nlerr.Wrap("devlink dev param show", dev.String(), "", err)
		}
		if got == dev {
			out = append(out, p)
		}
	}
	return out, nil
}

// Param returns one parameter of dev by name.
func (d *Devlink) Param(dev Device, name string) (Param, error) {
	ps, err := d.Params(dev)
	if err != nil {
		return Param{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	return Param{}, fmt.Errorf("%w: %s on %s", ErrParamNotFound, name, dev)
}

// FlowSteeringMode returns mlx5's runtime flow_steering_mode ("dmfs",
// "smfs" or "hmfs"); ErrParamNotFound on drivers without it.
func (d *Devlink) FlowSteeringMode(dev Device) (string, error) {
	p, err := d.Param(dev, "flow_steering_mode")
	if err != nil {
		return "", err
	}
	v, ok := p.Values[CmodeRuntime].(string)
	if !ok {
		return "", fmt.Errorf("devcheck: flow_steering_mode on %s has no runtime string value: %v", dev, p.Values)
	}
	return v, nil
}

func parseParam(b []byte) (Device, Param, error) {
	var dev Device
	p := Param{Values: map[ParamCmode]any{}}
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return dev, p, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.DEVLINK_ATTR_BUS_NAME:
			dev.Bus = ad.String()
		case unix.DEVLINK_ATTR_DEV_NAME:
			dev.Name = ad.String()
		case unix.DEVLINK_ATTR_PARAM:
			ad.Nested(func(pd *netlink.AttributeDecoder) error {
				var lists [][]byte
				for pd.Next() {
					switch pd.Type() {
					case unix.DEVLINK_ATTR_PARAM_NAME:
						p.Name = pd.String()
					case unix.DEVLINK_ATTR_PARAM_GENERIC:
						p.Generic = true
					case unix.DEVLINK_ATTR_PARAM_TYPE:
						p.Type = pd.Uint8()
					case unix.DEVLINK_ATTR_PARAM_VALUES_LIST:
						lists = append(lists, pd.Bytes())
					}
				}
				if err := pd.Err(); err != nil {
					return err
				}
				// Values are decoded after the type is known.
				for _, l := range lists {
					if err := parseValues(l, &p); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	return dev, p, ad.Err()
}

func parseValues(b []byte, p *Param) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		if ad.Type() != unix.DEVLINK_ATTR_PARAM_VALUE {
			continue
		}
		ad.Nested(func(vd *netlink.AttributeDecoder) error {
			var cmode ParamCmode
			var val any
			if p.Type == ParamTypeBool {
				val = false // flag absent: false
			}
			for vd.Next() {
				switch vd.Type() {
				case unix.DEVLINK_ATTR_PARAM_VALUE_CMODE:
					cmode = ParamCmode(vd.Uint8())
				case unix.DEVLINK_ATTR_PARAM_VALUE_DATA:
					switch p.Type {
					case ParamTypeU8:
						val = vd.Uint8()
					case ParamTypeU16:
						val = vd.Uint16()
					case ParamTypeU32:
						val = vd.Uint32()
					case ParamTypeString:
						val = vd.String()
					case ParamTypeBool:
						val = true
					default:
						val = append([]byte(nil), vd.Bytes()...)
					}
				}
			}
			if err := vd.Err(); err != nil {
				return err
			}
			p.Values[cmode] = val
			return nil
		})
	}
	return ad.Err()
}
