#include "commands/grade/keyed_seed.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace mw::grade {

std::uint64_t keyed_seed(std::string_view key, std::string_view message) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    std::size_t n = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                   reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, sizeof mac, &n) ||
        n < 8)
        throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | mac[i];
    return v;
}

}  // namespace mw::grade
