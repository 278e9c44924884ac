// Package eureka is heureka's codec for Netflix Eureka's wire format: the
// JSON and XML documents of the Eureka REST API (docs/eureka-api.md, "Documents"),
// mapped onto the registry model of package fsm.
//
// The package has three parts:
//
//   - Negotiation (format.go): ResponseFormat picks JSON iff Accept contains
//     "json" (docs/eureka-api.md, "Formats"); RequestFormat picks the decoder for a request body
//     from its Content-Type, sniffing the body when the type is generic.
//
//   - Encoding (encode.go): hand-written append-style encoders with no
//     reflection. They emit exactly Eureka's field order, types and omission
//     rules (docs/eureka-api.md, "Documents"), because clients depend on them: Spring's strict
//     Jackson model fails on any unknown key, fargo fails on a JSON boolean
//     where it expects a string, js-client crashes on an application with no
//     instances. The API is shaped for a response cache: AppendApplication
//     produces a per-application fragment, and AppendApplications assembles a
//     registry document from fragments without re-encoding them.
//
//   - Decoding (decode.go, parse.go): DecodeInstance reads a register body
//     leniently, accepting every variant real clients send (docs/eureka-api.md, "Register bodies clients send"), and
//     normalises it as Eureka does; ValidateInstance applies the register
//     checks of docs/eureka-api.md, "Register" with Eureka's exact messages. DecodeEntry,
//     DecodeApplication and DecodeApplications read our own documents back
//     (tests, tools). Every decoding error is a *BadRequestError.
//
// # Normalisations
//
// Decoding is not the exact inverse of encoding; the differences are
// deliberate and listed here so that round-trip tests can state them:
//
//   - Empty maps decode as nil (metadata, Amazon data-center metadata).
//   - dataCenterInfo: an absent object decodes as DataCenterInfo{} (empty
//     Class and Name, nil Metadata). A present object always decodes with a
//     non-empty Class: the client's @class if it sent one, else the canonical
//     class for its name. Output always carries the canonical class
//     (com.netflix.appinfo.AmazonInfo for "Amazon", else
//     com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo), so a
//     non-canonical Class does not survive a round trip. Metadata is kept only
//     for the Amazon data center (docs/eureka-api.md, "Data center").
//   - leaseInfo durations ≤ 0 decode as 0 (the fsm applies the defaults) but
//     are encoded as 30 / 90, the values the server actually uses.
//   - sid "unknown" and "" are not emitted (docs/eureka-api.md, "Instance"), so they decode as
//     "na"; an empty OverriddenStatus is emitted as UNKNOWN.
//   - XML cannot carry every string: control characters other than tab, line
//     feed and carriage return, U+FFFE and U+FFFF are written as U+FFFD, and a
//     metadata key that is not a plain ASCII XML name after XStream escaping
//     (docs/eureka-api.md, "Metadata map") is left out of XML output. JSON carries every string; invalid
//     UTF-8 becomes U+FFFD in both formats.
//   - Entry.ModifyIndex is not on the wire; Entry.Override is derived from
//     the instance's overriddenStatus (UNKNOWN means none).
//
// It owns the codec only and knows nothing of HTTP. It imports fsm (the
// model it maps) only; it must not import httpapi, cluster or cache.
package eureka
