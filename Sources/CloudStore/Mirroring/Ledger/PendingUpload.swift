import CloudStoreWire
import Foundation

/// What this device still has to upload for one record: a save (of some keys, or of the whole
/// object) or a delete. It lives in the record's metadata (``RecordMetadata/pendingUpload``), the
/// one queue of pending uploads, and is written in the transaction of the change that made it.
///
/// Rules, applied change by change (``adding(_:at:mayBeOnServer:)``): an insert uploads the whole
/// object; updates upload the union of their changed keys; a delete uploads a delete if the server
/// may have the record and nothing otherwise (insert then delete never leaves the device); an
/// insert after a delete (the same id re-created) uploads the whole object again, so it is not lost.
enum PendingUpload: Hashable, Sendable, Codable {
    /// Upload the object: all of it when `full`, otherwise the keys, each with when it changed here.
    case save(full: Bool, keys: [String: Date])
    /// Delete the record.
    case delete

    /// One local change to an object or link.
    enum Change: Hashable, Sendable {
        case insert(keys: Set<String>)
        case update(keys: Set<String>)
        case delete
    }

    /// The pending upload after one more local change.
    ///
    /// - Parameters:
    ///   - pending: what was pending before.
    ///   - mayBeOnServer: whether the server may have the record (``RecordMetadata/mayBeOnServer``).
    static func adding(
        _ change: Change, at date: Date, to pending: PendingUpload?, mayBeOnServer: Bool
    ) -> PendingUpload? {
        switch change {
        case .insert(let keys):
            return .save(full: true, keys: Dictionary(uniqueKeysWithValues: keys.map { ($0, date) }))
        case .update(let keys):
            let changed = Dictionary(uniqueKeysWithValues: keys.map { ($0, date) })
            switch pending {
            case .save(let full, let existing)?:
                return .save(full: full, keys: existing.merging(changed) { _, new in new })
            case .delete?:
                return .save(full: true, keys: changed)
            case nil:
                return .save(full: !mayBeOnServer, keys: changed)
            }
        case .delete:
            return mayBeOnServer ? .delete : nil
        }
    }

    /// The keys to upload, or nil for all of them.
    var keysToUpload: Set<String>? {
        guard case .save(let full, let keys) = self, !full else { return nil }
        return Set(keys.keys)
    }

    /// When each key changed on this device, for conflict resolution.
    var changeDates: [String: Date] {
        guard case .save(_, let keys) = self else { return [:] }
        return keys
    }
}

extension PendingUpload: JSONBytesWritable {
    /// The JSON of the synthesized Codable conformance (`{"save":{"full":…,"keys":{…}}}` with
    /// dates as seconds since 2001, or `{"delete":{}}`), written straight to bytes.
    func write(to json: inout JSONBytes) throws {
        try json.object { json in
            switch self {
            case .save(let full, let keys):
                json.member("save")
                try json.object { json in
                    json.member("full", bool: full)
                    json.member("keys")
                    // A save's keys mostly share one date (an insert's all do): its text is made once.
                    var last: (date: Date, text: [UInt8])?
                    try json.dictionary(keys) { json, date in
                        if let last, last.date == date { return json.raw(last.text) }
                        var text = JSONBytes(capacity: 24)
                        try text.double(date.timeIntervalSinceReferenceDate)
                        last = (date, text.bytes)
                        json.raw(text.bytes)
                    }
                }
            case .delete:
                json.member("delete")
                json.object { _ in }
            }
        }
    }
}

extension PendingUpload: JSONBytesReadable {
    /// The JSON ``write(to:)`` writes, read straight from bytes; any other shape is left to the
    /// decoder (``JSONBytesReadable``).
    init(from reader: inout JSONBytesReader) throws(JSONBytesReader.Declined) {
        var upload: PendingUpload?
        try reader.readObject { reader, key throws(JSONBytesReader.Declined) in
            guard upload == nil else { throw JSONBytesReader.Declined() }
            switch key {
            case "delete":
                try reader.readObject { _, _ throws(JSONBytesReader.Declined) in throw JSONBytesReader.Declined() }
                upload = .delete
            case "save":
                var full: Bool?
                var keys: [String: Date]?
                try reader.readObject { reader, member throws(JSONBytesReader.Declined) in
                    switch member {
                    case "full" where full == nil: full = try reader.readBool()
                    case "keys" where keys == nil:
                        var dates: [String: Date] = [:]
                        try reader.readObject { reader, name throws(JSONBytesReader.Declined) in
                            // The decoder keeps the first of a key that comes twice.
                            guard dates[name] == nil else { return try reader.skipValue() }
                            dates[name] = Date(timeIntervalSinceReferenceDate: try reader.readDouble())
                        }
                        keys = dates
                    default: throw JSONBytesReader.Declined()
                    }
                }
                guard let full, let keys else { throw JSONBytesReader.Declined() }
                upload = .save(full: full, keys: keys)
            default: throw JSONBytesReader.Declined()
            }
        }
        guard let upload else { throw JSONBytesReader.Declined() }
        self = upload
    }
}
