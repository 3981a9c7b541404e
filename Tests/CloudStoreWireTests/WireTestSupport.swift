import CloudStoreWire
import Foundation

/// Decodes a JSON literal.
func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
    try WireCoding.decode(type, from: Data(json.utf8))
}

/// Encodes a value and parses it back into a plain JSON tree, so tests compare structure, not bytes.
func jsonObject<T: Encodable>(_ value: T, numbersAsStrings: Bool = false) throws -> NSObject {
    let data = try WireCoding.makeEncoder(numbersAsStrings: numbersAsStrings).encode(value)
    return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as! NSObject
}

/// Parses a JSON literal into a plain JSON tree.
func jsonObject(_ json: String) throws -> NSObject {
    try JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) as! NSObject
}
