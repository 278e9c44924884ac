package fsm

// encodeRegister is Encode(t, body) for a *RegisterBody, byte for byte,
// written directly into an entry of its exact size. Every registration a
// client sends is encoded once on the node that took it; by reflection
// the codec spent about 3 % of a three-node cluster's CPU on a burst of
// registrations, and left a buffer's worth of garbage behind each.
//
// The codec writes a struct as a map of its fields under their codec
// names, sorted bytewise (the handle is Canonical), every integer in its
// narrowest signed form, and omits Replicated when it is false. The
// tests compare the two on random instances, so a codec upgrade or a new
// field that changes what the codec writes fails them.
func encodeRegister(t CmdType, body *RegisterBody) []byte {
	in := body.Instance
	var md, dcmd string       // the metadata blocks, as the log holds them
	size := headerLen + 1 + 3 // map header, "in"
	if body.Replicated {
		size += 4 + 1 // "rep", true
	}
	if in == nil {
		size++
	} else {
		md, dcmd = metadataBlock(in.Metadata), metadataBlock(in.DataCenterInfo.Metadata)
		size += instanceLen(in, len(md), len(dcmd))
	}
	b := make([]byte, 0, size)
	b = append(b, byte(t), versionOf(body), 0, 0, 0, 0, 0, 0, 0, 0)
	if body.Replicated {
		b = append(b, mpFixMap|2)
	} else {
		b = append(b, mpFixMap|1)
	}
	b = append(b, mpFixStr|2, 'i', 'n')
	if in == nil {
		b = append(b, mpNil)
	} else {
		b = appendInstance(b, in, md, dcmd)
	}
	if body.Replicated {
		b = append(b, mpFixStr|3, 'r', 'e', 'p', mpTrue)
	}
	return b
}

// msgpack's booleans.
const (
	mpFalse = 0xc2
	mpTrue  = 0xc3
)

// metadataBlock is m as the log holds it (and Metadata.CodecEncodeSelf
// writes it): the canonical block, or msgpack's nil.
func metadataBlock(m Metadata) string {
	if m.b == "" {
		return "\xc0"
	}
	return m.canonical()
}

// instanceFields is the number of fields appendInstance writes: the map
// header of an Instance.
const instanceFields = 26

// instanceLen is the encoded length of in, given its metadata blocks'.
// Each key is one fixstr byte and its name; each field is counted in the
// order appendInstance writes it.
func instanceLen(in *Instance, md, dcmd int) int {
	n := 3 // map16 header
	key := func(name string) int { return 1 + len(name) }
	n += key("a") + strLen(in.App)
	n += key("ag") + strLen(in.AppGroupName)
	n += key("asg") + strLen(in.ASGName)
	n += key("cds") + 1
	n += key("cid") + intLen(int64(in.CountryID))
	n += key("dc") + 1 + key("c") + strLen(in.DataCenterInfo.Class) + key("m") + dcmd + key("n") + strLen(in.DataCenterInfo.Name)
	n += key("du") + intLen(int64(in.DurationSecs))
	n += key("h") + strLen(in.HostName)
	n += key("hc") + strLen(in.HealthCheckURL)
	n += key("hp") + strLen(in.HomePageURL)
	n += key("id") + strLen(in.InstanceID)
	n += key("ip") + strLen(in.IPAddr)
	n += key("ldt") + intLen(in.LastDirtyTimestamp)
	n += key("md") + md
	n += key("os") + strLen(in.OverriddenStatus)
	n += key("p") + intLen(int64(in.Port))
	n += key("pe") + 1
	n += key("ri") + intLen(int64(in.RenewalIntervalSecs))
	n += key("s") + strLen(in.Status)
	n += key("shc") + strLen(in.SecureHealthCheckURL)
	n += key("sid") + strLen(in.Sid)
	n += key("sp") + intLen(int64(in.SecurePort))
	n += key("spe") + 1
	n += key("spu") + strLen(in.StatusPageURL)
	n += key("svip") + strLen(in.SecureVIPAddress)
	n += key("vip") + strLen(in.VIPAddress)
	return n
}

// appendInstance appends in as the codec writes an Instance: its fields
// sorted by codec name.
func appendInstance(b []byte, in *Instance, md, dcmd string) []byte {
	b = append(b, mpMap16, 0, instanceFields)
	b = appendStr(appendKey(b, "a"), in.App)
	b = appendStr(appendKey(b, "ag"), in.AppGroupName)
	b = appendStr(appendKey(b, "asg"), in.ASGName)
	b = appendBool(appendKey(b, "cds"), in.IsCoordinatingDiscoveryServer)
	b = appendInt(appendKey(b, "cid"), int64(in.CountryID))
	b = append(appendKey(b, "dc"), mpFixMap|3)
	b = appendStr(appendKey(b, "c"), in.DataCenterInfo.Class)
	b = append(appendKey(b, "m"), dcmd...)
	b = appendStr(appendKey(b, "n"), in.DataCenterInfo.Name)
	b = appendInt(appendKey(b, "du"), int64(in.DurationSecs))
	b = appendStr(appendKey(b, "h"), in.HostName)
	b = appendStr(appendKey(b, "hc"), in.HealthCheckURL)
	b = appendStr(appendKey(b, "hp"), in.HomePageURL)
	b = appendStr(appendKey(b, "id"), in.InstanceID)
	b = appendStr(appendKey(b, "ip"), in.IPAddr)
	b = appendInt(appendKey(b, "ldt"), in.LastDirtyTimestamp)
	b = append(appendKey(b, "md"), md...)
	b = appendStr(appendKey(b, "os"), in.OverriddenStatus)
	b = appendInt(appendKey(b, "p"), int64(in.Port))
	b = appendBool(appendKey(b, "pe"), in.PortEnabled)
	b = appendInt(appendKey(b, "ri"), int64(in.RenewalIntervalSecs))
	b = appendStr(appendKey(b, "s"), in.Status)
	b = appendStr(appendKey(b, "shc"), in.SecureHealthCheckURL)
	b = appendStr(appendKey(b, "sid"), in.Sid)
	b = appendInt(appendKey(b, "sp"), int64(in.SecurePort))
	b = appendBool(appendKey(b, "spe"), in.SecurePortEnabled)
	b = appendStr(appendKey(b, "spu"), in.StatusPageURL)
	b = appendStr(appendKey(b, "svip"), in.SecureVIPAddress)
	return appendStr(appendKey(b, "vip"), in.VIPAddress)
}

// appendKey appends a field name: all are shorter than a fixstr's limit.
func appendKey(b []byte, name string) []byte {
	return append(append(b, mpFixStr|byte(len(name))), name...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}
