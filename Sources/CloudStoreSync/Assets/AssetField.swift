import CloudStoreWire

/// Where an asset sits in a record: a field, and inside an asset list its position.
struct AssetField: Hashable, Sendable, CustomStringConvertible {
    var fieldName: String
    /// The position in a list field; nil for a field that holds one asset.
    var index: Int?

    var description: String { index.map { "\(fieldName)[\($0)]" } ?? fieldName }
}

extension Record {
    /// Every asset in the record's fields (also inside lists), by field name.
    var assetFields: [(field: AssetField, asset: Asset)] {
        fields.keys.sorted().flatMap { name -> [(field: AssetField, asset: Asset)] in
            switch fields[name] {
            case .asset(let asset)?:
                return [(AssetField(fieldName: name), asset)]
            case .list(let elements)?:
                return elements.enumerated().compactMap { index, element in
                    guard case .asset(let asset) = element else { return nil }
                    return (AssetField(fieldName: name, index: index), asset)
                }
            default:
                return []
            }
        }
    }

    /// Whether any field holds an asset (also inside a list).
    var hasAssets: Bool {
        fields.values.contains { value in
            switch value {
            case .asset: true
            case .list(let elements): elements.contains { if case .asset = $0 { true } else { false } }
            default: false
            }
        }
    }

    /// Replaces each asset with what `transform` makes of it.
    mutating func mapAssets(_ transform: (AssetField, Asset) -> Asset) {
        for (field, asset) in assetFields {
            let new = FieldValue.asset(transform(field, asset))
            if let index = field.index, case .list(var elements)? = fields[field.fieldName] {
                elements[index] = new
                fields[field.fieldName] = .list(elements)
            } else {
                fields[field.fieldName] = new
            }
        }
    }
}

extension FieldValue {
    /// The value as it is compared with a server copy: an asset by its checksum and size only
    /// (what was sent carries a receipt, what the server answers a download URL).
    var comparingAssetsByContent: FieldValue {
        switch self {
        case .asset(let asset): .asset(asset.unchanged)
        case .list(let elements): .list(elements.map(\.comparingAssetsByContent))
        default: self
        }
    }
}
