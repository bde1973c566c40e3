// SPDX-License-Identifier: GPL-2.0

//! Bit sets of ib_core (`IB_ACCESS_*`, `IB_QP_*`, ...) as Rust types.
//!
//! Each set is a newtype over the C bits whose named flags take their
//! values from the generated bindings, so the driver floor spells
//! `AccessFlags::REMOTE_WRITE`, never `IB_ACCESS_REMOTE_WRITE`, and no value
//! is copied by hand. Only the boundary (`ib`) turns raw bits into a set;
//! bits the set does not name survive the conversion, so the driver can
//! reject what it does not know ([`unknown`]).
//!
//! [`unknown`]: AccessFlags::unknown

/// Declares a flag set `$name` over `u32` with the given named flags.
macro_rules! flag_set {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fmeta:meta])* const $flag:ident = $value:expr;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Default)]
        $vis struct $name(u32);

        #[allow(dead_code)]
        impl $name {
            $($(#[$fmeta])* $vis const $flag: Self = Self($value as u32);)*

            /// No flag.
            $vis const EMPTY: Self = Self(0);
            /// Every flag this type names.
            $vis const KNOWN: Self = Self(0 $(| $value as u32)*);

            /// The set as stored in rxud's own queues (a kernel QP's
            /// send ring carries a REG_MR's rights); read back with
            /// [`Self::from_stored`]. The values are ib_core's.
            pub(crate) const fn to_stored(self) -> u32 {
                self.0
            }

            /// A set stored with [`Self::to_stored`].
            pub(crate) const fn from_stored(bits: u32) -> Self {
                Self(bits)
            }

            /// The set of exactly `bits` (boundary only: the driver works
            /// with named flags).
            pub(in crate::ib) const fn from_bits(bits: u32) -> Self {
                Self(bits)
            }

            /// The C bits (boundary only).
            pub(in crate::ib) const fn bits(self) -> u32 {
                self.0
            }

            /// Whether every flag of `other` is set.
            $vis const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any flag of `other` is set.
            $vis const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            $vis const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// The flags of either set (usable in constants, unlike `|`).
            $vis const fn union(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// The flags of `self` not in `other`.
            $vis const fn difference(self, other: Self) -> Self {
                Self(self.0 & !other.0)
            }

            /// The bits this type does not name (from a newer kernel or a
            /// user's typo).
            $vis const fn unknown(self) -> Self {
                self.difference(Self::KNOWN)
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;

            fn bitor(self, rhs: Self) -> Self {
                Self(self.0 | rhs.0)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.0)
            }
        }
    };
}
pub(super) use flag_set;
