// libFuzzer harness for the wire decoders, compiled together with Sources/CloudStoreWire by
// .ci/fuzz-wire (not part of the package). Every input is decoded as each request and response
// type; whatever decodes must encode and decode again, else the harness stops with the input.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func wireFuzzerTestOneInput(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    roundTrip(Record.self, data)
    roundTrip(FieldValue.self, data)
    roundTrip(ServerError.self, data)
    roundTrip(ZonesModifyRequest.self, data)
    roundTrip(ZonesLookupRequest.self, data)
    roundTrip(ZonesResponse.self, data)
    roundTrip(RecordsModifyRequest.self, data)
    roundTrip(RecordsResponse.self, data)
    roundTrip(RecordsLookupRequest.self, data)
    roundTrip(RecordsQueryRequest.self, data)
    roundTrip(RecordsQueryResponse.self, data)
    roundTrip(DatabaseChangesRequest.self, data)
    roundTrip(DatabaseChangesResponse.self, data)
    roundTrip(ZoneChangesRequest.self, data)
    roundTrip(ZoneChangesResponse.self, data)
    roundTrip(NotificationsResponse.self, data)
    roundTrip(CloudSchema.self, data)
    roundTrip(CallerResponse.self, data)
    return 0
}

private func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ data: Data) {
    guard let value = try? WireCoding.decode(T.self, from: data) else { return }
    let encoded: Data
    do {
        encoded = try WireCoding.encode(value)
    } catch {
        fatalError("\(T.self) decoded but does not encode: \(error)")
    }
    do {
        _ = try WireCoding.decode(T.self, from: encoded)
    } catch {
        fatalError("\(T.self) does not decode what it encoded: \(error)")
    }
}
